"""Issue 16.7 over HTTP with authentication on: roles, scope (404), the audit trail."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser_fixtures import LiveApp, csrf_of, signed_in

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

JSON = {"accept": "application/json"}


async def _csrf(client: httpx.AsyncClient) -> dict[str, str]:
    return {**JSON, "x-csrf-token": csrf_of((await client.get("/account")).text)}


async def _open(client: httpx.AsyncClient, site: str, **extra: Any) -> dict[str, Any]:
    body = {"site_id": site, "rule_id": "sanitary_discharge", "origin": "complaint", **extra}
    response = await client.post("/cases", json=body, headers=await _csrf(client))
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_homeowner_gets_404_for_another_sites_case_on_every_case_route(
    live_app: LiveApp,
) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        theirs = await _open(staff, "oak-5")
        mine = await _open(staff, "elm-16")
    async with signed_in(live_app, "elm16") as owner:
        headers = await _csrf(owner)
        paths = [
            ("GET", f"/cases/{theirs['id']}"),
            ("GET", f"/case/{theirs['id']}"),
            ("POST", f"/cases/{theirs['id']}/steps"),
            ("POST", f"/cases/{theirs['id']}/proof"),
            ("GET", f"/cases/{theirs['id']}/evidence.json"),
            ("GET", f"/cases/{theirs['id']}/documents/doc-x"),
            ("POST", f"/ui/cases/{theirs['id']}/step"),
        ]
        for method, path in paths:
            response = await owner.request(
                method, path, headers=headers, json={"kind": "inspection_requested"}
            )
            assert response.status_code == 404, f"{method} {path}: {response.status_code}"
        listed = (await owner.get("/cases", headers=JSON)).json()
        assert [c["id"] for c in listed] == [mine["id"]]
        assert (await owner.get(f"/cases/{mine['id']}", headers=JSON)).status_code == 200
        missing = await owner.get("/cases/case-doesnotexist", headers=JSON)
        assert missing.status_code == 404


async def test_a_homeowner_cannot_take_village_steps_but_can_request_an_inspection(
    live_app: LiveApp,
) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        case = await _open(staff, "elm-16")
    async with signed_in(live_app, "elm16") as owner:
        headers = await _csrf(owner)
        order = {"kind": "order", "service": {"party": "owner", "method": "in_person"}}
        refused = await owner.post(f"/cases/{case['id']}/steps", json=order, headers=headers)
        assert refused.status_code == 403
        asked = await owner.post(
            f"/cases/{case['id']}/steps",
            json={"kind": "inspection_requested", "note": "mornings"},
            headers=headers,
        )
        assert asked.status_code == 201, asked.text
        step = asked.json()["steps"][-1]
        assert (step["kind"], step["actor"], step["actor_role"]) == (
            "inspection_requested",
            "elm16",
            "homeowner",
        )
        assert asked.json()["state"] == "inspection_requested"
        # Opening cases and the ledger export are for public works.
        assert (await owner.post("/cases", json={}, headers=headers)).status_code in (403, 422)
        assert (await owner.get("/ledger.csv")).status_code == 403


async def test_public_works_serves_an_order_and_the_deadline_is_computed_from_the_pack(
    live_app: LiveApp,
) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        headers = await _csrf(staff)
        case = await _open(staff, "elm-16")
        order = {
            "kind": "order",
            "at": "2026-11-02T15:00:00Z",
            "service": {"party": "occupant", "method": "first_class_mail"},
        }
        response = await staff.post(f"/cases/{case['id']}/steps", json=order, headers=headers)
        assert response.status_code == 201, response.text
        deadlines = {d["id"]: d for d in response.json()["deadlines"]}
        assert deadlines["correct"]["due_on"] == "2026-12-02"
        assert deadlines["correct"]["citations"][0]["section"] == "(f)(1)"
        assert deadlines["apply_for_waiver"]["due_on"] == "2026-11-17"
        by_email = {"kind": "notice", "service": {"party": "owner", "method": "email"}}
        invalid = await staff.post(f"/cases/{case['id']}/steps", json=by_email, headers=headers)
        assert invalid.status_code == 422
        letters = await staff.post(
            "/cases/notices.pdf", json={"case_ids": [case["id"]]}, headers=headers
        )
        assert letters.status_code == 200 and letters.content.startswith(b"%PDF")
        csv = await staff.get("/ledger.csv", params={"site": "elm-16"})
        assert csv.status_code == 200
        assert "surcharge" in csv.text and "300.00" in csv.text


async def test_a_pack_without_the_step_answers_409(live_app: LiveApp) -> None:
    async with signed_in(live_app, "ll6-pw") as staff:
        headers = await _csrf(staff)
        case = await _open(staff, "main-101", origin="observation", confirms=True)
        waiver = {"kind": "waiver_applied", "waiver": {"grounds": "cost"}}
        response = await staff.post(f"/cases/{case['id']}/steps", json=waiver, headers=headers)
        assert response.status_code == 409
        assert "provides no such step" in response.json()["detail"]
        other = await staff.post(
            "/cases",
            json={"site_id": "elm-16", "rule_id": "x", "origin": "complaint"},
            headers=headers,
        )
        assert other.status_code == 404  # an Edgar site is out of this account's scope


async def test_an_observation_with_a_photo_confirms_the_open_case(live_app: LiveApp) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        headers = {"x-csrf-token": (await _csrf(staff))["x-csrf-token"], **JSON}
        suspected = await _open(staff, "oak-5", rule_id="icing_risk", origin="finding")
        assert suspected["state"] == "suspected"
        response = await staff.post(
            "/observations",
            data={"site_id": "oak-5", "what": "icing", "place": "public sidewalk by the outlet"},
            files={"photo": ("ice.png", b"\x89PNG\r\n\x1a\n fake", "image/png")},
            headers=headers,
        )
        assert response.status_code == 201, response.text
        assert (response.json()["id"], response.json()["state"]) == (suspected["id"], "confirmed")
        detail = (await staff.get(f"/cases/{suspected['id']}", headers=JSON)).json()
        step = detail["steps"][-1]
        assert (step["kind"], step["confirms"]) == ("observation", True)
        assert step["note"] == "icing at public sidewalk by the outlet"
        doc = step["documents"][0]
        photo = await staff.get(f"/cases/{suspected['id']}/documents/{doc['id']}")
        assert photo.content == b"\x89PNG\r\n\x1a\n fake"
        assert photo.headers["content-disposition"].startswith("attachment")
        disguised = await staff.post(
            "/observations",
            data={"site_id": "oak-5", "what": "icing", "place": "x"},
            files={"photo": ("ice.png", b"<html>not a png</html>", "image/png")},
            headers=headers,
        )
        assert disguised.status_code == 415
        unknown = await staff.post(
            "/observations",
            data={"site_id": "oak-5", "what": "icing", "place": "x", "rule_id": "made_up"},
            headers=headers,
        )
        assert unknown.status_code == 422
        bad = await staff.post(
            "/observations",
            data={"site_id": "oak-5", "what": "icing", "place": "x"},
            files={"photo": ("a.exe", b"MZ", "application/octet-stream")},
            headers=headers,
        )
        assert bad.status_code == 415


async def test_the_page_forms_record_a_checklist_and_print_ticked_letters(
    live_app: LiveApp,
) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        csrf = (await _csrf(staff))["x-csrf-token"]
        case = await _open(staff, "elm-16")
        page = await staff.get(f"/case/{case['id']}")
        assert 'name="item_no_sanitary_destination"' in page.text
        response = await staff.post(
            f"/ui/cases/{case['id']}/step",
            data={
                "csrf_token": csrf,
                "kind": "inspection_result",
                "outcome": "fail",
                "inspector": "J. Ruiz",
                "item_no_sanitary_destination": "fail",
                "item_rigid_line": "pass",
                "item_no_valving": "",
            },
        )
        assert response.status_code == 303
        step = (await staff.get(f"/cases/{case['id']}", headers=JSON)).json()["steps"][-1]
        assert step["inspection"]["items"] == [
            {"requirement_id": "no_sanitary_destination", "passed": False, "note": ""},
            {"requirement_id": "rigid_line", "passed": True, "note": ""},
        ]
        queue = await staff.get("/cases/queue/edgar")
        assert f'name="case_ids" value="{case["id"]}"' in queue.text
        letters = await staff.post(
            "/ui/cases/notices.pdf", data={"csrf_token": csrf, "case_ids": [case["id"]]}
        )
        assert letters.status_code == 200
        assert letters.headers["content-type"] == "application/pdf"


async def test_a_running_gateway_serves_case_waivers_and_inspected_facts_as_the_site(
    live_app: LiveApp,
) -> None:
    # Issue 16.3 / 16.4 through the composition root: the registry the routes read is
    # amended by the cases, so the site, its audit and its verdict carry them at once.
    async with signed_in(live_app, "edgar-pw") as staff:
        case = await _open(staff, "elm-16")
        headers = await _csrf(staff)
        steps = f"/cases/{case['id']}/steps"
        applied = {"kind": "waiver_applied", "waiver": {"grounds": "no storm lateral"}}
        assert (await staff.post(steps, json=applied, headers=headers)).status_code == 201
        granted = {
            "kind": "waiver_decided",
            "waiver": {"decision": "granted", "decider": "engineer", "end": "2099-01-01T00:00:00Z"},
        }
        assert (await staff.post(steps, json=granted, headers=headers)).status_code == 201
        result = {
            "kind": "inspection_result",
            "inspection": {
                "outcome": "fail",
                "inspector": "B. Inspector",
                "facts": {"outlet_to_property_line_ft": 6},
            },
        }
        assert (await staff.post(steps, json=result, headers=headers)).status_code == 201
        bad = {"kind": "inspection_result", "inspection": {"outcome": "pass", "facts": {"x": 1}}}
        assert (await staff.post(steps, json=bad, headers=headers)).status_code == 409

        site = (await staff.get("/sites/elm-16", headers=JSON)).json()
        [waiver] = [w for w in site["waivers"] if case["id"] in str(w["reference"])]
        assert waiver["rule"] == "sanitary_discharge"
        assert site["installation"]["outlet_to_property_line_ft"] == 6
        audit = (await staff.get("/sites/elm-16/audit", headers=JSON)).json()
        failed = {i["requirement_id"]: i for i in audit["items"] if i["status"] == "fail"}
        assert failed["property_line_setback"]["actual"] == 6
