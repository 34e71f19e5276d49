"""E-mail over SMTP (STARTTLS, implicit TLS, or plain for local tests) with aiosmtplib.

The Message-ID is derived from the notification id, so a message re-sent after a
crash between "sent" and "recorded" carries the same Message-ID and mail clients
that thread or dedupe on it show it once.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formataddr, formatdate, parseaddr

import aiosmtplib

from alerts.config import SmtpConfig
from alerts.models import DeliveryResult, OutgoingMessage

# Fold headers only past RFC 5322's hard limit: a subject folded right after
# "Subject:" comes back with a leading space from some parsers.
_POLICY = SMTP.clone(max_line_length=998)


def message_id(notification_id: str, sender: str) -> str:
    """Stable Message-ID for a notification: ``<notification-id@sender-domain>``."""
    domain = sender.rsplit("@", 1)[-1].strip(" >") or "sumpwatch.local"
    return f"<{notification_id}@{domain}>"


def build_message(message: OutgoingMessage, sender: str) -> EmailMessage:
    """A multipart/alternative e-mail: plain text first, HTML second."""
    msg = EmailMessage(policy=_POLICY)
    msg["From"] = sender
    msg["To"] = formataddr((message.recipient_name, message.recipient))
    msg["Subject"] = message.subject
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = message_id(message.notification_id, sender)
    msg["X-SumpWatch-Notification"] = message.notification_id
    if message.severity.value == "critical":
        msg["X-Priority"] = "1"
    msg.set_content(message.text)
    msg.add_alternative(message.html, subtype="html")
    return msg


class EmailChannel:
    """Sends notifications as e-mail through one SMTP server."""

    name = "email"

    def __init__(self, config: SmtpConfig) -> None:
        self._config = config

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        """Send one e-mail; 5xx replies are permanent, the rest is retried."""
        cfg = self._config
        password = cfg.password.get_secret_value() if cfg.password is not None else None
        try:
            # Sent as bytes: aiosmtplib would re-fold headers at 78 columns.
            _, reply = await aiosmtplib.send(
                build_message(message, cfg.sender).as_bytes(),
                sender=parseaddr(cfg.sender)[1],
                recipients=[message.recipient],
                hostname=cfg.host,
                port=cfg.port,
                username=cfg.username,
                password=password if cfg.username else None,
                use_tls=cfg.security == "tls",
                start_tls=cfg.security == "starttls",
                validate_certs=cfg.validate_certs,
                timeout=cfg.timeout_s,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            return DeliveryResult(False, f"recipient refused: {exc}", permanent=True)
        except aiosmtplib.SMTPResponseException as exc:
            return DeliveryResult(False, f"SMTP {exc.code}: {exc.message}", exc.code >= 500)
        except (aiosmtplib.SMTPException, OSError) as exc:
            return DeliveryResult(False, f"SMTP unavailable: {exc!r}")
        return DeliveryResult(True, f"accepted: {reply}")
