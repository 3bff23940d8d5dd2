"""Operator command messages: what may arrive on ``{prefix}/{table}/cmd/{name}``, decoded into msgspec
Structs whose ``Meta`` constraints (lengths, patterns, ranges) are the bounds, like the config's.

A command body (MQTT v5; docs/mqtt.md, "Commands")::

    {"operator": "pit-7", "command_id": "8c1f...", "issued_at": "2026-12-01T10:00:00.000Z",
     "args": {"shoe": 3, "round": 17, "reason": "misdeal"}}

* ``operator``: who sends it (1-128 printable characters, kept in the round record);
* ``command_id``: 1-64 characters ``[A-Za-z0-9._:-]``; a repeated id is answered with the first answer
  and applied once (the round state machine keeps the answers; :meth:`TableMachine.handle_command`);
* ``issued_at``: ISO 8601 UTC (``Z`` or ``+00:00``); required unless the MQTT v5 Message Expiry
  Interval is set on the message (OASIS MQTT 5.0 §3.3.2.3.3). Its age is checked by the daemon
  (``[mqtt] command_max_age``), not here (this module is pure: no clock);
* ``args``: the command's own arguments, one Struct per command (:data:`ARGS`); any other key refused.
  Round-changing commands name the round they target (``shoe``, ``round``; ``new_shoe`` the shoe it
  ends), so a command queued while the daemon was away can never hit a later round;
* an MQTT 3.1.1 requester (no v5 properties) may add ``response_topic`` and ``correlation_data``.

Before the typed decoding the JSON text itself is checked with the standard library's decoder, for
what msgspec accepts silently or reports unclearly: a duplicate key anywhere (``{"operator": "a",
"operator": "b"}`` would be read as ``b``), a non-finite number (``NaN``, ``Infinity``, ``1e999``),
a lone surrogate escape (``"\\ud800"``: not Unicode scalar text, cannot be journaled as UTF-8),
nesting deeper than :data:`MAX_JSON_DEPTH`. Each refusal is one line naming what is wrong
(:class:`CommandRejected`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = [
    "ARGS",
    "COMMAND_ID",
    "MAX_COMMAND_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_OPERATOR_CHARS",
    "MAX_REPLAY_SPAN",
    "MAX_REPLY_TOPIC_CHARS",
    "ROUND_BOUND",
    "SHOE_BOUND",
    "AckAlarmArgs",
    "CommandEnvelope",
    "CommandRejected",
    "CommandRequest",
    "EnterCardArgs",
    "NewShoeArgs",
    "ReplayArgs",
    "RescanArgs",
    "VoidRoundArgs",
    "parse_command",
    "text_problem",
]

MAX_COMMAND_BYTES = 4096
"""Largest accepted command payload (inputs are bounded; docs/security.md "Bounds")."""

MAX_OPERATOR_CHARS = 128
"""Longest operator identity accepted."""

MAX_REPLY_TOPIC_CHARS = 256
"""Longest response topic the daemon answers on."""

MAX_JSON_DEPTH = 8
"""Deepest nesting of objects/arrays accepted in a command body (the deepest valid body has 2)."""

MAX_REPLAY_SPAN = 10_000
"""``replay``: at most this many seqs per request (``to_seq - from_seq < MAX_REPLAY_SPAN``)."""

MAX_NUMBER = 2**53 - 1
"""Largest shoe, round or seq number accepted (exact in every JSON reader)."""

COMMAND_ID = r"^[A-Za-z0-9._:-]{1,64}$"
"""What a ``command_id`` may be."""

_PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""No C0/C1 control character and no DEL (one printable line)."""

_ISO_UTC = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|\+00:00)$"
"""ISO 8601 in UTC with seconds, optional fraction, ``Z`` or ``+00:00``."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Operator = Annotated[str, Meta(min_length=1, max_length=MAX_OPERATOR_CHARS, pattern=_PRINTABLE)]
CommandId = Annotated[str, Meta(min_length=1, max_length=64, pattern=COMMAND_ID)]
IssuedAt = Annotated[str, Meta(max_length=40, pattern=_ISO_UTC)]
ShoeNo = Annotated[int, Meta(ge=1, le=MAX_NUMBER)]
RoundNo = Annotated[int, Meta(ge=1, le=MAX_NUMBER)]
Seq = Annotated[int, Meta(ge=1, le=MAX_NUMBER)]
FreeText = Annotated[str, Meta(max_length=256)]
CardText = Annotated[str, Meta(min_length=1, max_length=8, pattern=_PRINTABLE)]
AlarmId = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
ReplyTopic = Annotated[str, Meta(min_length=1, max_length=MAX_REPLY_TOPIC_CHARS, pattern=_PRINTABLE)]
CorrelationText = Annotated[str, Meta(max_length=1024)]


class CommandRejected(ValueError):
    """A command request that cannot be parsed; ``str(exc)`` is the one-line reason sent back."""


class _Args(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Base of the per-command argument Structs (unknown arguments are refused, naming them)."""


class VoidRoundArgs(_Args, frozen=True):
    """``void_round``: the round it voids (``shoe``, ``round``) and an optional ``reason`` (free text)."""

    shoe: ShoeNo
    round: RoundNo
    reason: FreeText = ""


class EnterCardArgs(_Args, frozen=True):
    """``enter_card``: the round it enters the card into and the ``card`` (e.g. ``"5D"``, ``"TS"``)."""

    shoe: ShoeNo
    round: RoundNo
    card: CardText


class RescanArgs(_Args, frozen=True):
    """``rescan``: the decision on a possible rescan (alarm ``POSSIBLE_RESCAN``) of a round's card."""

    shoe: ShoeNo
    round: RoundNo
    action: Literal["keep", "set_aside"]


class NewShoeArgs(_Args, frozen=True):
    """``new_shoe``: the shoe it ends (``shoe``)."""

    shoe: ShoeNo


class AckAlarmArgs(_Args, frozen=True):
    """``ack_alarm``: the ``alarm_id`` acknowledged (``alarm``: its old name, still accepted)."""

    alarm_id: AlarmId | None = None
    alarm: AlarmId | None = None

    def __post_init__(self) -> None:
        if (self.alarm_id is None) == (self.alarm is None):
            raise ValueError("name exactly one of `alarm_id` (or its old name `alarm`)")


class ReplayArgs(_Args, frozen=True):
    """``replay``: republish the journaled messages ``from_seq`` .. ``to_seq`` (inclusive; at most
    :data:`MAX_REPLAY_SPAN` of them) on ``{prefix}/{table}/replay/...``."""

    from_seq: Seq
    to_seq: Seq

    def __post_init__(self) -> None:
        if self.from_seq > self.to_seq:
            raise ValueError(f"from_seq {self.from_seq} is after to_seq {self.to_seq}")
        if self.to_seq - self.from_seq >= MAX_REPLAY_SPAN:
            raise ValueError(f"at most {MAX_REPLAY_SPAN} seqs per replay "
                             f"(asked for {self.to_seq - self.from_seq + 1})")


ARGS: dict[str, type[_Args]] = {
    "void_round": VoidRoundArgs,
    "enter_card": EnterCardArgs,
    "rescan": RescanArgs,
    "new_shoe": NewShoeArgs,
    "ack_alarm": AckAlarmArgs,
    "replay": ReplayArgs,
}
"""Every command the daemon accepts and its arguments."""

ROUND_BOUND: frozenset[str] = frozenset({"void_round", "enter_card", "rescan"})
"""Commands that change a round: they name it (``shoe``, ``round``) and are refused for any other."""

SHOE_BOUND: frozenset[str] = frozenset({"new_shoe"})
"""Commands that name the shoe they act on (``shoe``) and are refused for any other."""


class CommandEnvelope(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The command body around ``args`` (see the module docstring)."""

    operator: Operator
    command_id: CommandId
    issued_at: IssuedAt | None = None
    args: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    response_topic: ReplyTopic | None = None
    correlation_data: CorrelationText | None = None


@dataclass(frozen=True, slots=True)
class CommandRequest:
    """A parsed command.

    ``name`` (from the topic), ``args`` (the command's arguments as JSON values: ints for shoe, round
    and seqs, strings otherwise; ``None`` values left out), ``operator``, ``command_id``, ``issued_at``
    (aware UTC datetime, or ``None`` when the message expiry stands in for it), the MQTT 3.1.1
    ``response_topic``/``correlation_data`` from the body, and from the MQTT message itself:
    ``retained`` (the retain flag) and ``message_expiry`` (the v5 Message Expiry Interval left, seconds,
    ``None`` when absent).
    """

    name: str
    args: dict[str, Any]
    operator: str
    command_id: str = ""
    issued_at: datetime | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    retained: bool = False
    message_expiry: int | None = None


def text_problem(text: str, *, controls: bool) -> str | None:
    """Why ``text`` cannot be journaled or published as Unicode scalar text, else ``None``.

    A lone surrogate (``"\\ud800"`` in JSON decodes to one) cannot be encoded as UTF-8; with ``controls``
    C0/C1 control characters (and DEL) are refused as well (an identity or a topic is one printable line).
    """
    for ch in text:
        o = ord(ch)
        if 0xD800 <= o <= 0xDFFF:
            return f"lone surrogate U+{o:04X}"
        if controls and (o < 0x20 or 0x7F <= o < 0xA0):
            return f"control character U+{o:04X}"
    return None


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _no_constant(text: str) -> Any:
    raise ValueError(f"non-finite number {text}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"non-finite number {text[:24]}")
    return value


def _where(path: str) -> str:
    return "command" if not path else f"command {path}"


def _walk(value: Any, path: str, depth: int) -> None:
    """Depth and text checks over the JSON value the standard library decoded."""
    if depth > MAX_JSON_DEPTH:
        raise CommandRejected(f"command nests deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        problem = text_problem(value, controls=False)
        if problem is not None:
            raise CommandRejected(f"{_where(path)} is not valid text ({problem})")
    elif isinstance(value, dict):
        for k, v in value.items():
            problem = text_problem(k, controls=True)
            if problem is not None:
                raise CommandRejected(f"{_where(path)} has a key that is not valid text ({problem})")
            _walk(v, f"{path}.{k}" if path else k, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _walk(v, f"{path}[{i}]", depth + 1)


def _checked_json(payload: bytes) -> Any:
    """The JSON value of ``payload`` after the checks msgspec does not make (module docstring)."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandRejected(f"command payload is not UTF-8 text (byte {exc.start})") from None
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant,
                           parse_float=_finite_float)
    except _Duplicate as exc:
        raise CommandRejected(f"command has the key {str(exc)[:64]!r} twice") from None
    except RecursionError:
        raise CommandRejected(f"command nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, a non-finite number, an int over Python's digit limit
        raise CommandRejected(f"command payload is not JSON: {str(exc)[:120]}") from None
    _walk(value, "", 0)
    return value


_PATTERN_TEXT = {
    "command_id": "must be 1-64 characters of A-Z a-z 0-9 . _ : -",
    "issued_at": "must be ISO 8601 in UTC, e.g. 2026-12-01T10:00:00.000Z",
    "alarm_id": "must be an alarm id such as 3.12",
    "alarm": "must be an alarm id such as 3.12",
}


def _validation_reason(exc: msgspec.ValidationError, body: Any, prefix: str) -> str:
    """One line from msgspec's error: the field named, a pattern said in words, the offending control
    character named for printable fields."""
    message = str(exc)
    match = re.search(r"- at `\$\.([A-Za-z_]+)", message)
    field = match.group(1) if match else None
    if field is not None and "regex" in message:
        value = body.get(field) if isinstance(body, dict) else None
        problem = text_problem(value, controls=True) if isinstance(value, str) else None
        if problem is not None:
            return f"{prefix}{field} is not valid text ({problem})"
        return f"{prefix}{field} {_PATTERN_TEXT.get(field, 'is not valid text')}"
    message = (message.replace("Object contains unknown field", "unknown field")
               .replace("Object missing required field", "missing field"))
    if field is not None:
        message = f"{field}: " + re.sub(r"\s*- at `\$\.[^`]*`", "", message)
    return f"{prefix}{message}"[:300]


def parse_command(name: str, payload: bytes, *, retained: bool = False,
                  message_expiry: int | None = None) -> CommandRequest:
    """Parse a command request (``name`` from the topic, ``payload`` the body) into a
    :class:`CommandRequest`.

    ``retained``/``message_expiry``: the MQTT message's retain flag and v5 Message Expiry Interval
    (``None`` when absent), carried into the request; ``issued_at`` may be left out only when the expiry
    is set. A retained command is parsed (it is refused by the daemon, which journals the refusal).

    Pure. Raises :class:`CommandRejected` (the one-line reason to send back) for an oversize payload
    (more than :data:`MAX_COMMAND_BYTES`), an unknown or malformed command name, bytes that are not
    UTF-8 JSON, a duplicate key, a non-finite number, a lone surrogate, nesting beyond
    :data:`MAX_JSON_DEPTH`, and anything the Structs refuse: a missing, overlong or non-printable
    ``operator``, a missing or malformed ``command_id`` or ``issued_at``, an unknown field, a missing,
    unknown or out-of-range argument.
    """
    if len(payload) > MAX_COMMAND_BYTES:
        raise CommandRejected(f"command payload too large ({len(payload)} > {MAX_COMMAND_BYTES} bytes)")
    if not _NAME.match(name):
        raise CommandRejected(f"invalid command name {name[:64]!r}")
    args_type = ARGS.get(name)
    if args_type is None:
        raise CommandRejected(f"unknown command {name!r} (one of {', '.join(ARGS)})")
    body = _checked_json(payload)
    if not isinstance(body, dict):
        raise CommandRejected("command payload must be a JSON object")
    try:
        env = msgspec.json.decode(payload, type=CommandEnvelope)
    except msgspec.ValidationError as exc:
        raise CommandRejected(_validation_reason(exc, body, "command ")) from None
    except msgspec.DecodeError as exc:  # checked above already; kept so nothing else can escape
        raise CommandRejected(f"command payload is not JSON: {str(exc)[:120]}") from None
    operator = env.operator.strip()
    if not operator:
        raise CommandRejected("command needs an 'operator' (non-empty string)")
    try:
        args = msgspec.json.decode(env.args, type=args_type)
    except msgspec.ValidationError as exc:
        raise CommandRejected(_validation_reason(exc, body.get("args"), f"{name} args: ")) from None
    except msgspec.DecodeError as exc:
        raise CommandRejected(f"command args are not JSON: {str(exc)[:120]}") from None
    issued_at = None
    if env.issued_at is not None:
        try:
            issued_at = datetime.fromisoformat(env.issued_at).astimezone(UTC)
        except ValueError:
            raise CommandRejected(f"command issued_at {env.issued_at!r} is not a valid time") from None
    elif message_expiry is None:
        raise CommandRejected("command needs 'issued_at' (ISO 8601 UTC) unless the MQTT v5 message "
                              "expiry is set")
    return CommandRequest(
        name=name, args={k: v for k, v in msgspec.structs.asdict(args).items() if v is not None},
        operator=operator, command_id=env.command_id, issued_at=issued_at,
        response_topic=env.response_topic, correlation_data=None if env.correlation_data is None else
        env.correlation_data.encode(), retained=retained, message_expiry=message_expiry)
