"""Home Assistant MQTT discovery: each site as one HA device (docs/home-assistant.md)."""

from gateway.homeassistant.bridge import HomeAssistantBridge
from gateway.homeassistant.discovery import discovery_messages, state_topic

__all__ = ["HomeAssistantBridge", "discovery_messages", "state_topic"]
