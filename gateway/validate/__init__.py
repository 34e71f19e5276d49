"""Validate: raw MQTT messages become Readings, StatusChanges or DeadLetters."""

from gateway.validate.validator import Validator, reason_of, shape_only

__all__ = ["Validator", "reason_of", "shape_only"]
