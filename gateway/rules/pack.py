"""Rule packs: one TOML file per jurisdiction, loaded into frozen dataclasses.

A pack is data: every number a rule uses (setbacks, season dates, pipe sizes,
deadlines, fines) is a table with its value, unit and citation into the ordinance
text. Code only knows a handful of *check kinds* and the detectors; adding a
jurisdiction is adding a file. The format is documented in ``docs/rule-packs.md``.

Pydantic validates the file (a config edge); the pipeline sees :class:`RulePack`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import date, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.domain import Citation
from gateway.errors import ConfigError
from gateway.registry.models import Installation
from gateway.tomlfile import load_toml

PACKS_DIR = Path(__file__).resolve().parent / "packs"

#: Used when a pack's text sets no winter season; reports mark it as a default.
DEFAULT_SEASON_START = (11, 15)
DEFAULT_SEASON_END = (4, 15)

CheckKind = Literal["min", "max", "gt", "lt", "equals", "in", "not_in"]
#: What the village does about a rule's finding, as the pack's text provides it.
EnforcementStepKind = Literal["inspection", "order", "citation", "notice"]
RequirementStatus = Literal["fail", "advisory"]

_CFG = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- file models


class _CiteModel(BaseModel):
    model_config = _CFG
    file: str = Field(min_length=1)
    section: str = Field(min_length=1)
    quote: str = ""
    #: The section applies only inside the pack's season (Edgar (e)(1)b).
    season_only: bool = False

    def build(self) -> Citation:
        return Citation(self.file, self.section, self.quote)


class _NumberModel(BaseModel):
    model_config = _CFG
    value: float | int | str
    unit: str = ""
    cite: _CiteModel
    note: str = ""
    #: The text names no such number: the value is the product's default, and
    #: ``cite`` is the provision it serves, not a source of the value.
    default: bool = False


class _SeasonModel(BaseModel):
    model_config = _CFG
    defined: bool
    start: _NumberModel | None = None
    end: _NumberModel | None = None
    note: str = ""

    @model_validator(mode="after")
    def _both_ends(self) -> _SeasonModel:
        if self.defined and (self.start is None or self.end is None):
            raise ValueError("a defined season needs start and end (MM-DD with citations)")
        for end in (self.start, self.end):
            if end is not None:
                _parse_month_day(str(end.value))
        return self


class _PenaltyModel(BaseModel):
    model_config = _CFG
    id: str
    summary: str
    per: Literal["day", "month", "violation", "year"]
    min_usd: _NumberModel | None = None
    max_usd: _NumberModel | None = None
    after_violations: _NumberModel | None = None
    within_days: _NumberModel | None = None
    jail_days: _NumberModel | None = None
    cite: _CiteModel | None = None

    @model_validator(mode="after")
    def _cited(self) -> _PenaltyModel:
        if self.cite is None and self.min_usd is None and self.max_usd is None:
            raise ValueError(f"penalty {self.id}: needs a cite or cited amounts")
        return self


class _FirstStepModel(BaseModel):
    model_config = _CFG
    step: EnforcementStepKind
    summary: str
    cite: _CiteModel | None = None
    deadline: str | None = Field(None, description="Dotted path of a days number")
    #: What must confirm a violation before this step: "inspection" when the text
    #: ties the step to a village inspection, "any" for any confirming record.
    requires: Literal["inspection", "any"] = "any"


class _StepsModel(BaseModel):
    model_config = _CFG
    suspected: _FirstStepModel | None = None
    confirmed: _FirstStepModel | None = None


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    enforced: bool
    cites: list[_CiteModel] = Field(default_factory=list)
    related: list[_CiteModel] = Field(default_factory=list)
    note: str = ""
    grace_period: str | None = Field(None, description="Dotted path of a days number")
    waiver_cite: _CiteModel | None = None
    steps: _StepsModel | None = None
    #: Replaces the catalog's advice where that advice would break this pack's text.
    advice: str = ""

    @model_validator(mode="after")
    def _cited_if_enforced(self) -> _RuleModel:
        if self.enforced and not self.cites:
            raise ValueError("an enforced rule needs at least one citation")
        for name, extra in (self.model_extra or {}).items():
            _NumberModel.model_validate(extra, context={"name": name})
        return self


class _RequirementModel(BaseModel):
    model_config = _CFG
    id: str
    field: str
    check: CheckKind
    value: Any = None
    number: str | None = None
    cite: _CiteModel | None = None
    when: dict[str, list[Any]] = Field(default_factory=dict)
    met_if: dict[str, list[Any]] = Field(default_factory=dict)
    unless_existing_before: str | None = None
    rule: str | None = Field(None, description="Detector rule whose waiver covers this item")
    status: RequirementStatus = "fail"
    message: str
    action: str = ""

    @model_validator(mode="after")
    def _shape(self) -> _RequirementModel:
        fields = Installation.model_fields
        for name in (self.field, *self.when, *self.met_if):
            if name not in fields:
                raise ValueError(f"requirement {self.id}: unknown installation field {name!r}")
        if (self.value is None) == (self.number is None):
            raise ValueError(f"requirement {self.id}: give exactly one of value or number")
        if self.number is None and self.cite is None:
            raise ValueError(f"requirement {self.id}: a literal value needs a cite")
        return self


StepName = Literal[
    "notice",
    "order",
    "inspection",
    "occupancy_inspection",
    "correction_proof",
    "waiver",
    "citation",
    "misdemeanor_referral",
]


class _StepModel(BaseModel):
    model_config = _CFG
    label: str = Field(min_length=1)
    cite: _CiteModel
    served_on: list[Literal["owner", "occupant"]] = Field(default_factory=list)
    methods: list[Literal["in_person", "first_class_mail"]] = Field(default_factory=list)
    refusal_cite: _CiteModel | None = None
    reinspection_cite: _CiteModel | None = None


class _DeadlineModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    id: str = Field(pattern=r"^[a-z0-9_]{1,64}$")
    label: str
    party: Literal["owner", "village"]
    after: str = Field(min_length=1, description="Step event that starts the clock")
    start: Literal["served", "received", "due_on"] = Field(alias="from")
    days: str | None = Field(None, description="Dotted path of a cited number in days")
    met_by: list[str] = Field(min_length=1)
    binding: bool = True
    suspended_by_waiver: bool = False
    suspension_cite: _CiteModel | None = None

    @model_validator(mode="after")
    def _anchor(self) -> _DeadlineModel:
        if (self.start == "due_on") != (self.days is None):
            raise ValueError(f"deadline {self.id}: give days, or from = 'due_on' (not both)")
        return self


class _LedgerModel(BaseModel):
    model_config = _CFG
    kind: Literal["monthly_surcharge", "per_offense"]
    penalty: str | None = None
    first_penalty: str | None = None
    later_penalty: str | None = None
    referral_penalty: str | None = None
    stop_cite: _CiteModel | None = None
    lookback_cite: _CiteModel | None = None
    each_day_cite: _CiteModel | None = None


class _EnforcementModel(BaseModel):
    model_config = _CFG
    procedure: Literal["order", "citation", "none"]
    summary: str = ""
    steps: dict[StepName, _StepModel] = Field(default_factory=dict)
    deadlines: list[_DeadlineModel] = Field(default_factory=list)
    ledger: _LedgerModel | None = None


class _PackModel(BaseModel):
    model_config = _CFG
    id: str = Field(pattern=r"^[a-z0-9_.-]{1,64}$")
    name: str
    file: str
    display_name: str = ""
    season: _SeasonModel
    setbacks: dict[str, _NumberModel] = Field(default_factory=dict)
    pipe: dict[str, _NumberModel] = Field(default_factory=dict)
    deadlines: dict[str, _NumberModel] = Field(default_factory=dict)
    dates: dict[str, _NumberModel] = Field(default_factory=dict)
    building_sewer: dict[str, _NumberModel] = Field(default_factory=dict)
    storm_sewer: dict[str, _NumberModel] = Field(default_factory=dict)
    penalties: list[_PenaltyModel] = Field(default_factory=list)
    rules: dict[str, _RuleModel] = Field(default_factory=dict)
    requirements: list[_RequirementModel] = Field(default_factory=list)
    enforcement: _EnforcementModel | None = None


#: Top-level tables whose entries are cited numbers, reachable as "<table>.<name>".
_NUMBER_TABLES = ("setbacks", "pipe", "deadlines", "dates", "building_sewer", "storm_sewer")


# ---------------------------------------------------------------- pipeline types


@dataclass(frozen=True, slots=True)
class Number:
    """A value from an ordinance, with its unit and citation."""

    value: float | int | str
    unit: str
    citation: Citation
    note: str = ""
    is_default: bool = False  # the product's default, not a number of the text

    @property
    def as_float(self) -> float:
        """The value as a float (numbers only)."""
        if isinstance(self.value, str):
            raise TypeError(f"{self.value!r} is not numeric")
        return float(self.value)


@dataclass(frozen=True, slots=True)
class Season:
    """The winter season, as a recurring (month, day) interval across New Year."""

    start: tuple[int, int]
    end: tuple[int, int]
    is_default: bool
    citations: tuple[Citation, ...] = ()
    note: str = ""

    def contains(self, day: date) -> bool:
        """True if ``day`` falls in the season (both ends included)."""
        md = (day.month, day.day)
        if self.start <= self.end:
            return self.start <= md <= self.end
        return md >= self.start or md <= self.end

    def label(self) -> str:
        """E.g. "Nov 15 - Apr 15" (with "(default)" when the text sets none)."""
        names = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
        text = (
            f"{names[self.start[0] - 1]} {self.start[1]} - {names[self.end[0] - 1]} {self.end[1]}"
        )
        return text + (" (default)" if self.is_default else "")


@dataclass(frozen=True, slots=True)
class Penalty:
    """One penalty provision. Amounts are None when the text gives none."""

    id: str
    summary: str
    per: str  # "day" | "month" | "violation" | "year"
    min_usd: Number | None
    max_usd: Number | None
    citations: tuple[Citation, ...]
    after_violations: Number | None = None
    within_days: Number | None = None
    jail_days: Number | None = None


@dataclass(frozen=True, slots=True)
class FirstStep:
    """What the village does first about a suspected or a confirmed finding of a rule
    (``[rules.<id>.steps]``; the whole procedure is :class:`EnforcementStep` s)."""

    step: str  # EnforcementStepKind
    summary: str
    citation: Citation | None = None
    deadline_days: int | None = None
    deadline_citation: Citation | None = None
    requires: str = "any"  # "inspection" | "any"


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """How a pack treats one detector rule id.

    ``enforced`` is True only when the text really forbids the condition; then
    findings cite ``citations`` and go to public works too. ``params`` holds
    extra cited numbers for the detector (e.g. ``distance_ft`` for icing).
    """

    rule_id: str
    enforced: bool
    citations: tuple[Citation, ...] = ()
    related: tuple[Citation, ...] = ()
    note: str = ""
    grace_period: timedelta | None = None
    grace_citation: Citation | None = None
    waiver_citation: Citation | None = None
    params: Mapping[str, Number] = dc_field(default_factory=dict)
    season_only: tuple[Citation, ...] = ()  # citations that apply only inside the season
    on_suspected: FirstStep | None = None
    on_confirmed: FirstStep | None = None
    advice: str = ""  # the pack's own wording of what to do (catalog.action_for)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One static installation requirement (see docs/rule-packs.md, check kinds)."""

    id: str
    field: str
    check: CheckKind
    expected: Any
    citations: tuple[Citation, ...]
    message: str
    action: str
    status: RequirementStatus = "fail"
    when: Mapping[str, tuple[Any, ...]] = dc_field(default_factory=dict)
    unless_existing_before: date | None = None
    unit: str = ""
    met_if: Mapping[str, tuple[Any, ...]] = dc_field(default_factory=dict)
    rule: str | None = None  # detector rule whose waiver (in a waiver pack) covers it
    default_number: bool = False  # the compared number is a product default


@dataclass(frozen=True, slots=True)
class EnforcementStep:
    """A step of the enforcement procedure the text provides (docs/enforcement.md)."""

    name: str  # one of StepName
    label: str
    citation: Citation
    served_on: tuple[str, ...] = ()  # "owner" / "occupant": who the text lets it be served on
    methods: tuple[str, ...] = ()  # "in_person" / "first_class_mail"
    refusal_citation: Citation | None = None
    reinspection_citation: Citation | None = None


@dataclass(frozen=True, slots=True)
class DeadlineSpec:
    """A deadline the text sets: ``days`` after a step (served or received), or a due date.

    ``binding`` False marks a window (the waiver application period): missing it is
    not a violation, it only closes the option.
    """

    id: str
    label: str
    party: str  # "owner" | "village"
    after: str  # the step event starting the clock
    start: str  # "served" | "received" | "due_on"
    days: Number | None
    met_by: tuple[str, ...]
    binding: bool = True
    suspended_by_waiver: bool = False
    suspension_citation: Citation | None = None

    @property
    def citation(self) -> Citation | None:
        """Where the period comes from (the cited number of days)."""
        return None if self.days is None else self.days.citation


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """How the text's money provisions become ledger lines (docs/enforcement.md)."""

    kind: str  # "monthly_surcharge" | "per_offense"
    penalty: Penalty | None = None
    first_penalty: Penalty | None = None
    later_penalty: Penalty | None = None
    referral_penalty: Penalty | None = None
    stop_citation: Citation | None = None
    lookback_citation: Citation | None = None
    each_day_citation: Citation | None = None


@dataclass(frozen=True, slots=True)
class Enforcement:
    """A pack's enforcement section: which steps exist, their deadlines, its ledger."""

    procedure: str = "none"  # "order" | "citation" | "none"
    summary: str = ""
    steps: Mapping[str, EnforcementStep] = dc_field(default_factory=dict)
    deadlines: tuple[DeadlineSpec, ...] = ()
    ledger: LedgerSpec | None = None

    def offers(self, step: str) -> bool:
        """True if the text provides this step (a pack without it does not offer it)."""
        return step in self.steps


@dataclass(frozen=True, slots=True)
class RulePack:
    """A jurisdiction's rules, every number cited. Built by :func:`load_packs`."""

    id: str
    name: str
    file: str
    season: Season
    numbers: Mapping[str, Number]
    penalties: tuple[Penalty, ...]
    rules: Mapping[str, RuleSpec]
    requirements: tuple[Requirement, ...]
    source: Path | None = None
    enforcement: Enforcement = dc_field(default_factory=Enforcement)
    #: The ordinance's title as people cite it (pages, alerts); "" for the name's head.
    display_name: str = ""

    @property
    def title(self) -> str:
        """The ordinance's title for people, e.g. "Village of Edgar Sump Pump Ordinance"."""
        return self.display_name or self.name.split(":")[0]

    def number(self, path: str) -> Number | None:
        """A cited number by dotted path, e.g. ``"setbacks.property_line_ft"``."""
        return self.numbers.get(path)

    @property
    def setbacks(self) -> dict[str, Number]:
        """Setback distances by name (e.g. ``property_line_ft``)."""
        return self._table("setbacks")

    @property
    def deadlines(self) -> dict[str, Number]:
        """Deadlines in days by name (e.g. ``connection_order_days``)."""
        return self._table("deadlines")

    @property
    def pipe(self) -> dict[str, Number]:
        """Discharge pipe requirements (e.g. ``min_inside_diameter_in``)."""
        return self._table("pipe")

    def _table(self, prefix: str) -> dict[str, Number]:
        cut = len(prefix) + 1
        return {k[cut:]: v for k, v in self.numbers.items() if k.startswith(prefix + ".")}

    def rule(self, rule_id: str) -> RuleSpec:
        """The pack's treatment of a rule (not enforced, no citation, if absent)."""
        return self.rules.get(rule_id) or RuleSpec(rule_id, enforced=False)

    def grace_period(self, rule_id: str) -> timedelta | None:
        """Time the text gives the owner to correct a finding of this rule, if any."""
        return self.rule(rule_id).grace_period

    def citations_on(self, rule_id: str, day: date) -> tuple[Citation, ...]:
        """The rule's citations that apply on local ``day`` (season-only ones in season)."""
        spec = self.rule(rule_id)
        in_season = self.season.contains(day)
        return tuple(c for c in spec.citations if in_season or c not in spec.season_only)


# ---------------------------------------------------------------- loading


def _parse_month_day(text: str) -> tuple[int, int]:
    try:
        month, day = (int(p) for p in text.split("-"))
        date(2024, month, day)  # leap year: accepts 02-29
    except ValueError as exc:
        raise ValueError(f"season date {text!r} is not MM-DD") from exc
    return month, day


def _number(model: _NumberModel) -> Number:
    return Number(model.value, model.unit, model.cite.build(), model.note, model.default)


def _step(
    pack_id: str, model: _FirstStepModel | None, numbers: dict[str, Number]
) -> FirstStep | None:
    if model is None:
        return None
    deadline: Number | None = None
    if model.deadline is not None:
        deadline = _days(numbers, pack_id, f"step deadline {model.deadline!r}", model.deadline)
    return FirstStep(
        step=model.step,
        summary=model.summary,
        citation=None if model.cite is None else model.cite.build(),
        deadline_days=None if deadline is None else int(deadline.as_float),
        deadline_citation=None if deadline is None else deadline.citation,
        requires=model.requires,
    )


def _days(numbers: Mapping[str, Number], pack_id: str, what: str, name: str) -> Number:
    """The pack's number ``name``, which ``what`` needs to be a count of days."""
    num = numbers.get(name)
    if num is None or num.unit != "days":
        raise ConfigError(f"pack {pack_id}: {what} must name a number in days")
    return num


def _opt(model: _NumberModel | None) -> Number | None:
    return None if model is None else _number(model)


def _rule(pack_id: str, rule_id: str, rule: _RuleModel, numbers: dict[str, Number]) -> RuleSpec:
    """One rule; its own numbers join ``numbers`` (as ``rules.<id>.<name>``)."""
    params = {
        name: _number(_NumberModel.model_validate(raw))
        for name, raw in (rule.model_extra or {}).items()
    }
    for name, num in params.items():
        numbers[f"rules.{rule_id}.{name}"] = num
    grace: Number | None = None
    if rule.grace_period is not None:
        what = f"rule {rule_id} grace_period {rule.grace_period!r}"
        grace = _days(numbers, pack_id, what, rule.grace_period)
    return RuleSpec(
        rule_id=rule_id,
        enforced=rule.enforced,
        citations=tuple(c.build() for c in rule.cites),
        related=tuple(c.build() for c in rule.related),
        note=rule.note,
        grace_period=None if grace is None else timedelta(days=grace.as_float),
        grace_citation=None if grace is None else grace.citation,
        waiver_citation=None if rule.waiver_cite is None else rule.waiver_cite.build(),
        params=MappingProxyType(params),
        season_only=tuple(c.build() for c in rule.cites if c.season_only),
        on_suspected=_step(pack_id, rule.steps.suspected if rule.steps else None, numbers),
        on_confirmed=_step(pack_id, rule.steps.confirmed if rule.steps else None, numbers),
        advice=rule.advice,
    )


def _season(season: _SeasonModel) -> Season:
    """The pack's winter season, or the default one when its text sets none."""
    if not season.defined:
        return Season(DEFAULT_SEASON_START, DEFAULT_SEASON_END, is_default=True, note=season.note)
    assert season.start is not None and season.end is not None
    return Season(
        _parse_month_day(str(season.start.value)),
        _parse_month_day(str(season.end.value)),
        is_default=False,
        citations=(season.start.cite.build(), season.end.cite.build()),
        note=season.note,
    )


def _penalty(p: _PenaltyModel) -> Penalty:
    return Penalty(
        id=p.id,
        summary=p.summary,
        per=p.per,
        min_usd=_opt(p.min_usd),
        max_usd=_opt(p.max_usd),
        citations=_penalty_citations(p),
        after_violations=_opt(p.after_violations),
        within_days=_opt(p.within_days),
        jail_days=_opt(p.jail_days),
    )


def _build(model: _PackModel, source: Path | None) -> RulePack:
    numbers: dict[str, Number] = {}
    for table in _NUMBER_TABLES:
        for name, num in getattr(model, table).items():
            numbers[f"{table}.{name}"] = _number(num)
    # Rules first: their own numbers are in ``numbers`` before requirements read it.
    rules = {rule_id: _rule(model.id, rule_id, r, numbers) for rule_id, r in model.rules.items()}
    requirements = tuple(_requirement(model.id, r, numbers) for r in model.requirements)
    penalties = tuple(_penalty(p) for p in model.penalties)
    return RulePack(
        id=model.id,
        name=model.name,
        file=model.file,
        season=_season(model.season),
        numbers=MappingProxyType(numbers),
        penalties=penalties,
        rules=MappingProxyType(rules),
        requirements=requirements,
        source=source,
        enforcement=_enforcement(model, numbers, penalties),
        display_name=model.display_name,
    )


def _built(cite: _CiteModel | None) -> Citation | None:
    return None if cite is None else cite.build()


def _deadline(pack_id: str, d: _DeadlineModel, numbers: dict[str, Number]) -> DeadlineSpec:
    days = None if d.days is None else _days(numbers, pack_id, f"deadline {d.id}", d.days)
    return DeadlineSpec(
        id=d.id,
        label=d.label,
        party=d.party,
        after=d.after,
        start=d.start,
        days=days,
        met_by=tuple(d.met_by),
        binding=d.binding,
        suspended_by_waiver=d.suspended_by_waiver,
        suspension_citation=_built(d.suspension_cite),
    )


def _ledger(pack_id: str, lm: _LedgerModel, penalties: tuple[Penalty, ...]) -> LedgerSpec:
    by_id = {p.id: p for p in penalties}

    def penalty(pid: str | None) -> Penalty | None:
        if pid is None:
            return None
        if pid not in by_id:
            raise ConfigError(f"pack {pack_id}: enforcement ledger names unknown penalty {pid}")
        return by_id[pid]

    return LedgerSpec(
        kind=lm.kind,
        penalty=penalty(lm.penalty),
        first_penalty=penalty(lm.first_penalty),
        later_penalty=penalty(lm.later_penalty),
        referral_penalty=penalty(lm.referral_penalty),
        stop_citation=_built(lm.stop_cite),
        lookback_citation=_built(lm.lookback_cite),
        each_day_citation=_built(lm.each_day_cite),
    )


def _enforcement(
    model: _PackModel, numbers: dict[str, Number], penalties: tuple[Penalty, ...]
) -> Enforcement:
    e = model.enforcement
    if e is None:
        return Enforcement()
    steps: dict[str, EnforcementStep] = {
        name: EnforcementStep(
            name=name,
            label=step.label,
            citation=step.cite.build(),
            served_on=tuple(step.served_on),
            methods=tuple(step.methods),
            refusal_citation=_built(step.refusal_cite),
            reinspection_citation=_built(step.reinspection_cite),
        )
        for name, step in e.steps.items()
    }
    return Enforcement(
        procedure=e.procedure,
        summary=e.summary,
        steps=MappingProxyType(steps),
        deadlines=tuple(_deadline(model.id, d, numbers) for d in e.deadlines),
        ledger=None if e.ledger is None else _ledger(model.id, e.ledger, penalties),
    )


def _penalty_citations(p: _PenaltyModel) -> tuple[Citation, ...]:
    cites: list[Citation] = []
    for item in (p.cite, *(n.cite if n else None for n in (p.min_usd, p.max_usd))):
        if item is not None and item.build() not in cites:
            cites.append(item.build())
    return tuple(cites)


def _requirement(pack_id: str, r: _RequirementModel, numbers: dict[str, Number]) -> Requirement:
    citations: list[Citation] = []
    if r.cite is not None:
        citations.append(r.cite.build())
    unit = ""
    expected: Any = r.value
    default_number = False
    if r.number is not None:
        num = numbers.get(r.number)
        if num is None:
            raise ConfigError(f"pack {pack_id}: requirement {r.id} names unknown number {r.number}")
        expected, unit, default_number = num.value, num.unit, num.is_default
        # A product default's citation names the provision it serves, not a source
        # of the value: the requirement cites its own provision instead.
        if not num.is_default and num.citation not in citations:
            citations.append(num.citation)
    if default_number and r.cite is None:
        raise ConfigError(
            f"pack {pack_id}: requirement {r.id} compares with a default number and needs "
            "its own cite"
        )
    if r.check in ("min", "max", "gt", "lt") and not isinstance(expected, int | float):
        raise ConfigError(f"pack {pack_id}: requirement {r.id} compares with a non-number")
    if r.check in ("in", "not_in") and not isinstance(expected, list):
        raise ConfigError(f"pack {pack_id}: requirement {r.id} needs a list value")
    before: date | None = None
    if r.unless_existing_before is not None:
        num = numbers.get(r.unless_existing_before)
        raw = num.value if num is not None else r.unless_existing_before
        try:
            before = date.fromisoformat(str(raw))
        except ValueError as exc:
            raise ConfigError(f"pack {pack_id}: requirement {r.id}: bad date {raw!r}") from exc
        if num is not None and num.citation not in citations:
            citations.append(num.citation)
    return Requirement(
        id=r.id,
        field=r.field,
        check=r.check,
        expected=tuple(expected) if isinstance(expected, list) else expected,
        citations=tuple(citations),
        message=r.message,
        action=r.action,
        status=r.status,
        when=MappingProxyType({k: tuple(v) for k, v in r.when.items()}),
        unless_existing_before=before,
        unit=unit,
        met_if=MappingProxyType({k: tuple(v) for k, v in r.met_if.items()}),
        rule=r.rule,
        default_number=default_number,
    )


def load_pack(path: Path) -> RulePack:
    """Read and validate one pack file."""
    model = load_toml(path, _PackModel, "rule pack")
    if model.id != path.stem:
        raise ConfigError(f"rule pack {path}: id {model.id!r} must equal the file name")
    return _build(model, path)


def load_packs(extra_dir: Path | None = None) -> dict[str, RulePack]:
    """The packaged packs plus every ``*.toml`` in ``extra_dir`` (which may override)."""
    packs: dict[str, RulePack] = {}
    folders = [PACKS_DIR] + ([extra_dir] if extra_dir is not None else [])
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"rule pack folder {folder} does not exist")
        for path in sorted(folder.glob("*.toml")):
            pack = load_pack(path)
            packs[pack.id] = pack
    return packs
