"""Ingest: the MQTT subscription that feeds raw messages into the pipeline."""

from gateway.ingest.mqtt import AckToken, MqttSource

__all__ = ["AckToken", "MqttSource"]
