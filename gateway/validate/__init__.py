"""Validate: raw MQTT messages become Readings, StatusChanges or DeadLetters."""

from gateway.validate.validator import Validator, reason_of

__all__ = ["Validator", "reason_of"]
