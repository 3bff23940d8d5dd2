"""The table configuration: one TOML file per table, decoded strictly into frozen msgspec Structs.

``load_config(path)`` / ``parse_config(text)`` return a :class:`TableConfig` or raise
:class:`ConfigError`, whose message is ONE line naming the key, e.g. ``unknown key: mqtt.hots``,
``spots.7: mapped twice (also spots.3)``, ``wagers.dragon_7: not offered in baccarat (only ez-baccarat)``,
``wagers.perfect_pairs.paytable: '25-12-5' is allowed with 8 decks only, not 6 (...)``.

Validation: unknown keys, wrong types, a paytable the regulations do not allow for the deck
count (checked by the rules modules' own ``from_names``), a wager the game does not offer, a spot
mapped twice, limits, seats, devices, and the file size (at most :data:`MAX_CONFIG_BYTES`). The key
reference is docs/configuration.md; examples for every game are in deploy/examples/.

Amounts (limits, commission unit) are at most :data:`MAX_MONEY` (2**53 - 1 minor units). Sections for
another game (``[blackjack]`` in a baccarat config) are refused rather than silently ignored, so a
misplaced section is noticed. Every check ``tablesense run`` depends on is here, so ``check-config``
and ``run`` agree.

Pure apart from :func:`load_config` reading the file (at most 1 MiB read, also from ``/dev/zero`` or a
FIFO) and checking that ``journal.directory`` is not an existing non-directory; device protocols are
looked up in the codec registry (:func:`drivers.protocols.get_codec`).
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from tablesense.daemon.bounded import InputTooLarge, read_bounded
from tablesense.daemon.config_issues import ConfigError, ConfigIssue, IssueCollector, key_lines
from tablesense.daemon.netaddr import is_loopback
from tablesense.daemon.rules.advantage import parse_threshold
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.games import GAMES, get_game
from tablesense.daemon.rules.money import MAX_AMOUNT, CommissionRule, RoundingMode, max_stake, wager_odds
from tablesense.daemon.rules.settlement import Bet, Hand
from tablesense.daemon.topics import TABLE_ID, prefix_problem, table_problem
from tablesense.drivers.protocols import UnknownProtocol, get_codec
from tablesense.drivers.transports import url_problem

__all__ = [
    "CREDENTIALS_VARIABLE",
    "MAX_CONFIG_BYTES",
    "MAX_MONEY",
    "MAX_SESSION_EXPIRY",
    "MAX_STALE_RECONNECT",
    "RATE_TEXT",
    "SIGNAGE_LANGUAGES",
    "SOCKET_STALE_RECONNECT",
    "BlackjackConfig",
    "BurnConfig",
    "CommissionConfig",
    "ConfigError",
    "ConfigIssue",
    "DeviceConfig",
    "IntegrityConfig",
    "JournalConfig",
    "MetricsConfig",
    "MqttConfig",
    "RoundConfig",
    "SignageConfig",
    "SpotConfig",
    "TableConfig",
    "TlsConfig",
    "UthConfig",
    "WagerConfig",
    "inspect_config",
    "inspect_config_file",
    "load_config",
    "parse_config",
    "parse_size",
]

MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than 1 MiB is refused (bounded inputs, docs/security.md "Bounds")."""

_ID = TABLE_ID
"""Table, seat, spot and device ids: safe inside an MQTT topic level (no ``/``, ``+``, ``#``)."""

MAX_MONEY = MAX_AMOUNT
"""The largest amount (minor units) a limit, stake or commission unit may be: 2**53 - 1, so every amount
tablesense publishes stays exact for JSON consumers that read numbers as IEEE doubles (JavaScript). A
wager's ``max`` is bounded further so that its win at its largest odds is too
(:func:`daemon.rules.money.max_stake`)."""

SOCKET_STALE_RECONNECT = 5.0
"""Default ``[devices.<name>] stale_reconnect`` (seconds) for ``socket://`` and ``rfc2217://`` devices:
with the link's ``stale_after`` of 5 s, a TCP connection that has carried no valid frame for 10 s (five
heartbeat periods: a device sends ``HB`` after 2 s of quiet, docs/protocol.md §3) is closed and reopened.
A half-open connection (a firewall, NAT or bridge restarted between host and device server) never errors,
so without this the table would wait for that device forever."""

MAX_STALE_RECONNECT = 3600.0
"""The largest ``stale_reconnect`` accepted (seconds)."""

MAX_SESSION_EXPIRY = 0xFFFFFFFF
"""MQTT 5 Session Expiry Interval is a four-byte integer (MQTT 5.0 §3.1.2.11.2); 0xFFFFFFFF = never."""

RATE_TEXT = re.compile(r"\s*(?:\d{1,12}(?:\.\d{1,12})?\s*%?|\d{1,12}\s*/\s*\d{1,12})\s*")
"""The forms a commission rate may take (``"5%"``, ``"0.05"``, ``"1/20"``, ``"5"``): plain digits only, no
exponent, so ``"1e999999999"`` can never make :class:`fractions.Fraction` build a billion-digit integer."""

_GAME_SECTIONS = {"blackjack": ("blackjack",), "uth": ("uth",)}
"""Sections that configure one game only; present in another game's config they are refused."""

_HAND_BETS = frozenset({Bet.PERFECT_PAIRS, Bet.DRAGON_BONUS})
"""Baccarat wagers placed on one hand (§ 627c.1; § 631a.8(a)(4))."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class CommissionConfig(_Strict, frozen=True):
    """Banker commission (standard baccarat; rules.md §1.7, § 631a.13).

    Attributes:
        rate: ``"5%"``, ``"0.05"`` or ``"1/20"`` (exact, never a float in money).
        unit: rounding unit in minor units (1 = cent, 25 = quarter).
        rounding: ``half_up`` (default), ``up``, ``down`` or ``half_even`` (the same key as in
            ``tablesense settle`` input; it was called ``mode`` before).
    """

    rate: str = "5%"
    unit: int = 1
    rounding: str = "half_up"

    def rule(self) -> CommissionRule:
        """The :class:`CommissionRule`; raise ``ValueError`` on a bad rate, unit or rounding."""
        return CommissionRule(CommissionRule.parse_rate(self.rate), self.unit, RoundingMode(self.rounding))


class WagerConfig(_Strict, frozen=True):
    """A wager the table offers: its paytable (where the game has one) and table limits in minor units."""

    paytable: str | None = None
    min: int = 1
    max: int = 100_000_000


class SpotConfig(_Strict, frozen=True):
    """A bet-pad spot: the seat (box) it belongs to, the bet, the baccarat hand for hand wagers, and the
    nominal stake used when the pad senses presence only (no amount); default: the wager's ``min``."""

    seat: str
    bet: str
    hand: str | None = None
    nominal_stake: int | None = None


class DeviceConfig(_Strict, frozen=True):
    """A device: pyserial URL (``/dev/ttyUSB0``, ``socket://host:port``, ``usb:VID:PID``), codec name,
    baud rate, role (``shoe`` or ``pads``), and when a stale link is reopened (docs/configuration.md
    "[devices.<name>]", docs/devices.md).

    Attributes:
        stale_reconnect: seconds (0-3600) a link may stay ``stale`` (no valid frame for the link's
            ``stale_after``, 5 s; devices send a heartbeat after 2 s of quiet, docs/protocol.md §3) before
            its connection is closed and reopened; ``0`` = never. Absent: :data:`SOCKET_STALE_RECONNECT`
            for a ``socket://`` or ``rfc2217://`` URL (a half-open TCP connection never errors), never
            for others. Read it
            through :meth:`reopen_stale_after`.
    """

    url: str
    role: Literal["shoe", "pads"]
    protocol: str = "tsref"
    baud: int = 115200
    stale_reconnect: float | None = None

    def reopen_stale_after(self) -> float | None:
        """Seconds spent ``stale`` before the link is reopened (``DeviceLink``'s ``stale_reconnect``), or
        ``None`` for never: the configured value (``0`` = never), else :data:`SOCKET_STALE_RECONNECT` for
        the TCP URLs ``socket://`` and ``rfc2217://`` and ``None`` for every other URL."""
        if self.stale_reconnect is None:
            return SOCKET_STALE_RECONNECT if self.url.startswith(("socket://", "rfc2217://")) else None
        return float(self.stale_reconnect) or None


class TlsConfig(_Strict, frozen=True):
    """TLS to the broker with server verification (``ca_file``) and an optional client certificate."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


class MqttConfig(_Strict, frozen=True):
    """The broker connection (docs/configuration.md "[mqtt]", docs/security.md).

    Attributes:
        protocol: ``"5"`` (default) or ``"3.1.1"``; ``fallback`` retries with 3.1.1 when 5 is refused.
        client_id: fixed per table; default ``tablesense-{table}``.
        session_expiry: seconds the broker keeps the persistent session.
        credentials_file: file with ``username`` and ``password`` lines (must not be world-readable;
            checked at start-up, not here).
        command_rate, command_burst: operator commands per second a table accepts sustained (1-1000),
            and at once (1-10000); over the limit a command is answered "rate limited" and not journaled.
        command_max_age: seconds (1-300) a command stays valid after its ``issued_at``; older ones are
            refused, as are ones more than 5 s in the future, and ones whose MQTT v5 message expiry is
            longer than this.
        max_message_bytes: the largest message payload published (bytes, 1024-268435455; default
            262144, the shipped broker's ``message_size_limit``): a larger journaled message is logged,
            counted and not published (docs/mqtt.md "Message size").
    """

    host: str = "127.0.0.1"
    port: int = 1883
    tls: TlsConfig | None = None
    credentials_file: str | None = None
    topic_prefix: str = "tablesense"
    protocol: Literal["5", "3.1.1"] = "5"
    fallback: bool = True
    client_id: str | None = None
    session_expiry: int = 3600
    keepalive: int = 30
    command_rate: int = 20
    command_burst: int = 50
    command_max_age: int = 30
    max_message_bytes: int = 262144


class JournalConfig(_Strict, frozen=True):
    """Where the SQLite journal lives, the key that seals it, and how long rounds are kept (docs/journal.md).

    ``key_file``: the table's journal sealing key (docs/journal.md "The key"): an absolute path, or a
    bare systemd credential name (default ``journal-key``: ``$CREDENTIALS_DIRECTORY/journal-key``, from
    ``LoadCredential=journal-key:/etc/tablesense/<table>.journal-key`` in the unit).
    ``retention_rounds``: complete rounds always kept (at least 10: game recall shows the current round
    and the 9 before it, AGCO "most recent game plus 9 prior", Fla. Admin. Code 75-14.043).
    ``retention_days``:
    a round older than that is deleted only once it also ended more than this many days ago (0: by
    round count alone). ``max_size``: when the journal's used size exceeds this many bytes (an integer,
    or a string such as ``"2 GiB"``, ``"500 MB"``; 0: no bound), older rounds are deleted regardless of
    ``retention_days``, never the last 10. Undelivered rows are never deleted
    (:meth:`daemon.journal.Journal.prune`).
    """

    directory: str = "/var/lib/tablesense"
    key_file: str = "journal-key"
    retention_rounds: int = 1000
    retention_days: int = 90
    max_size: int | str = "2 GiB"

    @property
    def max_size_bytes(self) -> int | None:
        """``max_size`` in bytes (``None``: unbounded). Raises ``ValueError`` for a bad size."""
        return parse_size(self.max_size) or None


_SIZE = re.compile(r"^\s*(\d+)\s*(|b|kb|mb|gb|tb|kib|mib|gib|tib)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


def parse_size(value: int | str) -> int:
    """A byte count from an integer or ``"<n> <unit>"`` (B, kB/MB/GB/TB: powers of 10; KiB/MiB/GiB/TiB:
    powers of 2). Raises ``ValueError`` naming the value."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} must not be negative")
        return value
    m = _SIZE.match(value)
    if m is None:
        raise ValueError(f"{value[:40]!r} is not a size (e.g. 2147483648, \"2 GiB\", \"500 MB\")")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


class BurnConfig(_Strict, frozen=True):
    """Start-of-shoe burn (rules.md §1.3): never hard-coded.

    Attributes:
        mode: ``shoe`` (the shoe reports burn frames; default), ``face_value`` (the first card out is
            turned up and its baccarat value says how many more are burned, a 10 or face card burns
            10), ``fixed`` (the first ``count`` cards are burned) or ``none``.
        count: cards burned in ``fixed`` mode.
    """

    mode: Literal["shoe", "face_value", "fixed", "none"] = "shoe"
    count: int = 0


class BlackjackConfig(_Strict, frozen=True):
    """Blackjack dealing: ``hole_card`` false for no-hole-card tables (rules.md §2)."""

    hole_card: bool = True


class UthConfig(_Strict, frozen=True):
    """UTH card-to-position order (rules.md §3: casinos differ).

    Attributes:
        deal: ``card_by_card`` (one card to each seat with a wager, then the dealer, twice) or
            ``stacks`` (two cards to each seat in turn, then two to the dealer).
        board: the five community cards ``before`` or ``after`` the hands.
        burn_before_board: cards burned right before the community cards.
    """

    deal: Literal["card_by_card", "stacks"] = "card_by_card"
    board: Literal["before", "after"] = "after"
    burn_before_board: int = 0


class IntegrityConfig(_Strict, frozen=True):
    """Integrity watches. ``advantage_threshold``: raise ``ADVANTAGE_PLAY`` when a pair wager's
    exact expected return per unit for the next round is strictly above it; an exact decimal, fraction or
    percentage string (``"0"``, ``"0.005"``, ``"0.5%"``), docs/advantage-watch.md."""

    advantage_threshold: str = "0"


SIGNAGE_LANGUAGES = ("en", "zh-Hans", "zh-Hant")
"""Languages of the table display: English, Simplified Chinese, Traditional Chinese (BCP 47 tags)."""


class SignageConfig(_Strict, frozen=True):
    """The table display (``tablesense signage``, docs/signage.md). ``language``: the displays' default
    language, ``en``, ``zh-Hans`` (Simplified Chinese) or ``zh-Hant`` (Traditional Chinese), published in
    the table-info message; a display may choose another with its URL (``?lang=zh-Hant``)."""

    language: str = "en"


class RoundConfig(_Strict, frozen=True):
    """When the next round starts after one is complete.

    ``start = "card"`` (default): the next card out of the shoe locks the next round (the first card
    counts as no-more-bets) once the completed round was cleared: the dealer's round-end button, or a
    bet-pad change after the round completed (chips paid, collected or placed), or no wager was on
    the round. A card before that is a mis-pull: EXTRA_CARD, held. ``start = "button"``: the next round
    opens on the dealer's round-end or no-more-bets button only, and any card before that is an
    EXTRA_CARD irregularity.

    ``stall_seconds``: the deal watchdog: a round being dealt with no card for this long raises a
    ``DEAL_STALLED`` alarm (it holds nothing; the next card clears it). 0 turns it off; the default,
    300 s, leaves room for a slow baccarat squeeze.
    """

    start: Literal["card", "button"] = "card"
    stall_seconds: int = 300


class MetricsConfig(_Strict, frozen=True):
    """Prometheus metrics (:mod:`daemon.metrics`; docs/install.md "Metrics"), off by default.

    Attributes:
        listen: ``HOST:PORT`` of an HTTP listener on a loopback address (``127.0.0.1:9464``), for a
            Prometheus or agent on the same machine; ``None``: no listener.
        textfile: a ``.prom`` file rewritten atomically every ``interval`` seconds for node_exporter's
            textfile collector (``/run/tablesense/bac-01/metrics.prom``): the form for hardened units.
        interval: seconds between two readings of the daemon's state (and textfile writes), 1-3600.
    """

    listen: str | None = None
    textfile: str | None = None
    interval: int = 15


class TableConfig(_Strict, frozen=True):
    """One table (docs/configuration.md). Money is integer minor units of ``currency``."""

    table: str
    game: str
    seats: list[str]
    wagers: dict[str, WagerConfig]
    spots: dict[str, SpotConfig]
    decks: int | None = None
    currency: str = "USD"
    minor_unit: int = 2
    commission: CommissionConfig | None = None
    devices: dict[str, DeviceConfig] = msgspec.field(default_factory=dict)
    mqtt: MqttConfig = msgspec.field(default_factory=MqttConfig)
    journal: JournalConfig = msgspec.field(default_factory=JournalConfig)
    burn: BurnConfig = msgspec.field(default_factory=BurnConfig)
    blackjack: BlackjackConfig = msgspec.field(default_factory=BlackjackConfig)
    uth: UthConfig = msgspec.field(default_factory=UthConfig)
    round: RoundConfig = msgspec.field(default_factory=RoundConfig)
    integrity: IntegrityConfig = msgspec.field(default_factory=IntegrityConfig)
    signage: SignageConfig = msgspec.field(default_factory=SignageConfig)
    metrics: MetricsConfig = msgspec.field(default_factory=MetricsConfig)

    @property
    def shoe_decks(self) -> int:
        """Decks in the shoe (UTH: 1)."""
        return self.decks if self.decks is not None else 1

    @property
    def client_id(self) -> str:
        """The MQTT client id (``mqtt.client_id`` or ``tablesense-{table}``)."""
        return self.mqtt.client_id or f"tablesense-{self.table}"

    def paytables(self) -> dict[str, str]:
        """``{bet name: paytable name}`` for the wagers that name one."""
        return {bet: w.paytable for bet, w in self.wagers.items() if w.paytable is not None}

    def commission_rule(self) -> CommissionRule | None:
        """The configured commission rule (standard baccarat), else ``None``."""
        return self.commission.rule() if self.commission is not None else None

    def rules(self) -> Any:
        """The game's rules object (``BaccaratRules``, ``BlackjackRules`` or ``UthRules``).

        Raises:
            RulesError: only for a config that did not pass :func:`parse_config`.
        """
        return get_game(self.game).rules(self.decks, self.paytables(), self.commission_rule())

    def spot_for(self, seat: str, bet: str, hand: str | None = None) -> str | None:
        """The spot id mapped to ``(seat, bet, hand)``, or ``None``."""
        for spot, s in self.spots.items():
            if (s.seat, s.bet, s.hand) == (seat, bet, hand):
                return spot
        return None


_SECTIONS: dict[str, type[msgspec.Struct]] = {
    "spots": SpotConfig, "wagers": WagerConfig, "devices": DeviceConfig}
"""Config tables whose values are Structs keyed by name (errors inside them name the key)."""


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> TableConfig:
    """Read and validate a table config file.

    ``environ`` (default ``os.environ``) supplies ``$CREDENTIALS_DIRECTORY`` (:func:`parse_config`).

    Raises:
        ConfigError: unreadable file, larger than 1 MiB, not UTF-8 TOML, or any validation error; every
            problem found, each with the file, the line where known and the key (:meth:`ConfigError.lines`).
    """
    cfg, error, _ = inspect_config_file(path, environ=environ)
    if error is not None:
        raise error
    assert cfg is not None
    return cfg


def inspect_config_file(path: str | Path, *, environ: Mapping[str, str] | None = None
                        ) -> tuple[TableConfig | None, ConfigError | None, str]:
    """Check a table config file without raising: ``(config, problems, text)``.

    ``problems`` is ``None`` when the config is usable (then ``config`` is it). Otherwise it is a
    :class:`ConfigError` holding every problem :func:`inspect_config` finds (plus ``journal.directory``
    naming an existing non-directory), reported against the file; ``config`` is then what decoded with
    the bad values set aside (for checks that do not depend on them, e.g. ``check-config``'s file checks),
    or ``None`` when nothing could be read. ``text`` is the file's text (``""`` when unreadable).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            return None, ConfigError(f"config is {size} bytes, larger than {MAX_CONFIG_BYTES} (1 MiB)",
                                     file=str(p)), ""
        data = read_bounded(p, MAX_CONFIG_BYTES, f"{p}: config")  # /dev/zero, a FIFO: st_size is 0
    except InputTooLarge as exc:
        return None, ConfigError(str(exc)), ""
    except OSError as exc:
        return None, ConfigError(f"cannot read config: {exc.strerror or exc}", file=str(p)), ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, ConfigError("config is not UTF-8 text", file=str(p)), ""
    cfg, issues = inspect_config(text, environ=environ)
    if cfg is not None:
        journal_dir = Path(cfg.journal.directory)
        if (cfg.journal.directory.strip() and control_problem(cfg.journal.directory) is None
                and journal_dir.exists() and not journal_dir.is_dir()):
            issues += _err("journal.directory",
                           f"{cfg.journal.directory} exists and is not a directory").located(text).issues
    if not issues:
        return cfg, None, text
    return cfg, ConfigError(issues, file=str(p)), text


CREDENTIALS_VARIABLE = "${CREDENTIALS_DIRECTORY}"
"""Written in a ``*_file`` value (``credentials_file = "${CREDENTIALS_DIRECTORY}/mqtt"``), it stands for
the directory in which systemd hands a unit its ``LoadCredential=`` secrets (systemd.exec(5),
"Credentials"); :func:`parse_config` replaces it with ``$CREDENTIALS_DIRECTORY`` when that is set."""


def parse_config(text: str, *, environ: Mapping[str, str] | None = None) -> TableConfig:
    """Validate TOML ``text`` as a table config (see module docstring).

    In every value of a key ending in ``_file`` (``[mqtt] credentials_file``, ``[mqtt.tls] key_file``,
    ``[journal] key_file`` ...), :data:`CREDENTIALS_VARIABLE` is replaced with ``environ``'s (default
    ``os.environ``) ``CREDENTIALS_DIRECTORY``; where that is not set the text stays as written, so the
    file checks of ``run`` and ``check-config`` name it.

    Raises:
        ConfigError: every problem :func:`inspect_config` finds, each naming the key and its line;
            ``str()`` is one line.
    """
    cfg, issues = inspect_config(text, environ=environ)
    if issues:
        raise ConfigError(issues)
    assert cfg is not None
    return cfg


def inspect_config(text: str, *, environ: Mapping[str, str] | None = None
                   ) -> tuple[TableConfig | None, list[ConfigIssue]]:
    """Check TOML ``text`` as a table config without raising: ``(config, problems)``, every problem
    located at its line.

    In order: TOML syntax errors (each one; the line at fault is set aside and the rest read on, a broken
    ``[table]`` header with the keys under it), decoding errors (unknown keys, wrong types, missing keys;
    each value at fault is set aside), and, once the whole file reads and decodes, the checks of the
    values (:func:`_validate`). With no problem ``config`` is the table config; otherwise it is what
    decoded with the bad values set aside (its other values are as written), or ``None`` when nothing
    did.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        return None, [ConfigIssue(f"config is larger than {MAX_CONFIG_BYTES} bytes (1 MiB)")]
    raw, issues = _toml_document(text)
    if raw is None:
        return None, issues
    _expand_credentials(raw, os.environ if environ is None else environ)
    cfg, decoding = _decode(raw)
    if issues:  # a key whose line was set aside for its syntax error is not missing from the file
        present = key_lines(text)
        decoding = [i for i in decoding if not (i.message.startswith("missing key: ") and i.key in present)]
    issues += decoding
    if cfg is not None and not issues:
        try:
            _validate(cfg, raw)
        except ConfigError as exc:
            issues += exc.issues
    if issues:
        issues = list(ConfigError(issues).located(text).issues)
    return cfg, issues


_MAX_SYNTAX_ERRORS = 20
"""At most this many TOML syntax errors are listed from one file (then: "fix these first")."""


def _toml_document(text: str) -> tuple[dict[str, Any] | None, list[ConfigIssue]]:
    """The TOML document in ``text`` with each line that has a syntax error set aside (blanked, so
    every line keeps its number; a broken table header is set aside with the keys under it, which would
    otherwise land in the table before), and one issue per syntax error. ``None`` when the document
    cannot be read at all (an error with no line, or too many)."""
    lines = text.splitlines(keepends=True)
    issues: list[ConfigIssue] = []
    for _ in range(_MAX_SYNTAX_ERRORS):
        try:
            return tomllib.loads("".join(lines)), issues
        except tomllib.TOMLDecodeError as exc:
            issue = _toml_issue(str(exc))
        except RecursionError:
            return None, [*issues, ConfigIssue("invalid TOML: nested too deeply")]
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            return None, [*issues, ConfigIssue(f"invalid TOML: {_one_line(str(exc))[:200]}")]
        issues.append(issue)
        at = (issue.line or 0) - 1
        if not 0 <= at < len(lines) or not lines[at].strip():
            return None, issues  # nothing left to set aside: the rest cannot be read
        end = at + 1
        if lines[at].lstrip().startswith("["):
            while end < len(lines) and not lines[end].lstrip().startswith("["):
                end += 1
        for n in range(at, end):
            lines[n] = "\n" if lines[n].endswith("\n") else ""
    issues.append(ConfigIssue(f"invalid TOML: more than {_MAX_SYNTAX_ERRORS} syntax errors; fix these first"))
    return None, issues


_TOML_AT = re.compile(r"^(?P<what>.*?) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")


def _toml_issue(message: str) -> ConfigIssue:
    """A TOML syntax error, with the line and column tomllib names."""
    text = _one_line(message)
    m = _TOML_AT.match(text)
    if m is None:
        return ConfigIssue(f"invalid TOML: {text}")
    return ConfigIssue(f"invalid TOML: {m.group('what')}", line=int(m.group("line")),
                       column=int(m.group("col")))


def _expand_credentials(node: Any, environ: Mapping[str, str]) -> None:
    """Replace :data:`CREDENTIALS_VARIABLE` in the ``*_file`` string values of the raw document."""
    directory = environ.get("CREDENTIALS_DIRECTORY")
    if not directory or not isinstance(node, dict):
        return
    for key, value in node.items():
        if isinstance(value, dict):
            _expand_credentials(value, environ)
        elif isinstance(value, str) and key.endswith("_file") and CREDENTIALS_VARIABLE in value:
            node[key] = value.replace(CREDENTIALS_VARIABLE, directory.rstrip("/"))


_MAX_ISSUES = 100
"""At most this many problems are collected from one file."""


def _decode(raw: dict[str, Any]) -> tuple[TableConfig | None, list[ConfigIssue]]:
    """Decode the raw TOML document, collecting every decoding problem: after each one the offending
    value is set aside (a key removed, a whole ``[spots]``/``[wagers]``/``[devices]`` entry removed, a
    missing required key given an empty stand-in) and decoding is tried again.

    Returns the config and no problem; or every problem and the config decoded with the bad values set
    aside (``None`` when setting them aside did not make it decode). Nothing is checked further while
    any value does not decode.
    """
    work = copy.deepcopy(raw)
    issues: list[ConfigIssue] = []
    seen: set[str] = set()
    for _ in range(_MAX_ISSUES):
        try:
            cfg = msgspec.convert(work, TableConfig)
        except msgspec.ValidationError as exc:
            key, message = _locate(work, str(exc))
        except RecursionError:
            issues.append(ConfigIssue("config: nested too deeply"))
            break
        else:
            return cfg, issues
        if key in seen:
            break
        seen.add(key)
        issues.append(ConfigIssue(message, key=key))
        if not _set_aside(work, key, missing=message.startswith("missing key: ")):
            break
    return None, issues


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path(key: str) -> list[str | int]:
    """``spots.7.seat`` -> ``["spots", "7", "seat"]``; ``seats[1]`` -> ``["seats", 1]``."""
    return [int(i) if i else name for name, i in _TOKEN.findall(key)]


def _set_aside(work: dict[str, Any], key: str, *, missing: bool) -> bool:
    """Change the raw document so that the problem at ``key`` does not recur (see :func:`_decode`);
    ``False`` when there is no way to."""
    path = _path(key)
    if not path or not isinstance(path[0], str):
        return False
    top = path[0]
    if top in _SECTIONS and len(path) >= 2 and isinstance(work.get(top), dict) and path[1] in work[top]:
        del work[top][path[1]]  # a whole spot, wager or device entry
        return True
    fields = {f.name: f for f in msgspec.structs.fields(TableConfig)}
    if len(path) == 1 or isinstance(path[1], int):
        field = fields.get(top)
        if field is None:  # an unknown top-level key
            return work.pop(top, None) is not None
        if not field.required:
            return work.pop(top, None) is not None or missing
        stand_in = {str: "", list: [], dict: {}}.get(typing.get_origin(field.type) or field.type)
        if stand_in is None:
            return False
        work[top] = stand_in
        return True
    node: Any = work
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if missing or not isinstance(node, dict) or path[-1] not in node:
        return False  # a required key of a section (none today): nothing to stand in for it
    del node[path[-1]]
    return True


def _one_line(text: str) -> str:
    return " ".join(text.split())


_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]*)`")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]*)`")


def _locate(raw: dict[str, Any], msg: str) -> tuple[str, str]:
    """``(key, one-line message)`` of a msgspec validation error; names the table key when msgspec's path
    says only ``spots[...]`` (a dict value)."""
    m = re.search(r"at `\$\.(\w+)\[\.\.\.\]", msg)
    section = raw.get(m.group(1)) if m else None
    if m and isinstance(section, dict):
        typ = _SECTIONS[m.group(1)]
        for key, value in section.items():
            try:
                msgspec.convert(value, typ)
            except msgspec.ValidationError as inner:
                sub_key, text = _validation_message(str(inner))
                sub = text.split(": ", 1)
                full = f"{m.group(1)}.{key}" + ("" if sub_key == "config" else f".{sub_key}")
                if text.startswith(("unknown key: ", "missing key: ")):
                    return full, f"{sub[0]}: {full}"
                return full, f"{full}: {sub[1]}"
    return _validation_message(msg)


def _key_path(path: str) -> str:
    """``.spots['7'].seat`` -> ``spots.7.seat``; ``.seats[0]`` -> ``seats[0]``."""
    out = re.sub(r"\['([^']*)'\]", r".\1", path)
    return out.lstrip(".")


_BET_NAMES = frozenset(b.value for b in Bet)

_RENAMED = {"commission.mode": "commission.rounding"}
"""Keys that were renamed: naming an old one says the new name."""


def _validation_message(msg: str) -> tuple[str, str]:
    """``(key, message)`` of a msgspec error (``config`` when it is about the whole document)."""
    m = _AT.match(_one_line(msg))
    assert m is not None
    what, path = m.group("what"), _key_path(m.group("path") or "")
    prefix = f"{path}." if path else ""
    if u := _UNKNOWN.match(what):
        key = f"{prefix}{u.group('field')}"
        renamed = f" (renamed: {_RENAMED[key]})" if key in _RENAMED else ""
        return key, f"unknown key: {key}{renamed}"
    if u := _MISSING.match(what):
        key = f"{prefix}{u.group('field')}"
        return key, f"missing key: {key}"
    return path or "config", f"{path or 'config'}: {what[:1].lower()}{what[1:]}"


def _err(key: str, text: str) -> ConfigError:
    """The problem ``text`` with ``key``: ``"<key>: <text>"``, located at that key's line."""
    return ConfigError([ConfigIssue(f"{key}: {_one_line(text)}", key=key)])


def _each_problem(check: Callable[[TableConfig], object], cfg: TableConfig, found: IssueCollector) -> bool:
    """Run ``check`` until it passes, recording every problem: after each one the key it names is reset
    to its default (or its ``[spots]``/``[wagers]``/``[devices]`` entry, or its list item, left out) and
    the check runs again, so one check reports all its problems, not just the first. Stops when a key
    cannot be reset or comes up again. ``True`` when ``check`` raised nothing at all."""
    seen: set[str] = set()
    left_out: dict[str, list[int]] = {}  # list key -> original indices of the items left out so far
    for _ in range(_MAX_ISSUES):
        try:
            check(cfg)
            return not seen
        except ConfigError as exc:
            issue = exc.issues[0]
            if issue.key is None:
                found.issues.append(issue)
                return False
            key = _original_index(issue.key, left_out)
            if key in seen:
                return False
            seen.add(key)
            message = issue.message.replace(issue.key, key, 1) if key != issue.key else issue.message
            found.issues.append(ConfigIssue(message, key=key, line=issue.line, column=issue.column))
            reset = _reset(cfg, _path(issue.key))
            if reset is None:
                return False
            cfg = reset
    return False


def _original_index(key: str, left_out: dict[str, list[int]]) -> str:
    """``seats[1]`` after ``seats[0]`` was left out is ``seats[2]`` of the file; records it as left out."""
    m = re.fullmatch(r"(?P<list>[^\[]+)\[(?P<i>\d+)\](?P<rest>.*)", key)
    if m is None:
        return key
    gone = left_out.setdefault(m.group("list"), [])
    index = int(m.group("i"))
    for earlier in sorted(gone):
        if earlier <= index:
            index += 1
    gone.append(index)
    return f"{m.group('list')}[{index}]{m.group('rest')}"


def _reset(node: Any, path: list[str | int]) -> Any:
    """``node`` with the value at ``path`` back to its default (a Struct field), or left out (a dict
    entry, a list item); ``None`` when impossible (a required field outside a dict entry)."""
    head, rest = path[0], path[1:]
    if isinstance(node, msgspec.Struct) and isinstance(head, str):
        field = next((f for f in msgspec.structs.fields(node) if f.name == head), None)
        if field is None:
            return None
        if rest:
            inner = _reset(getattr(node, head), rest)
        elif field.required:
            inner = None
        else:
            inner = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
        if inner is None and (rest or field.required):
            return None
        return msgspec.structs.replace(node, **{head: inner})
    if isinstance(node, dict) and head in node:
        inner = _reset(node[head], rest) if rest else None
        return {k: (inner if k == head else v) for k, v in node.items() if k != head or inner is not None}
    if isinstance(node, list) and isinstance(head, int) and 0 <= head < len(node):
        inner = _reset(node[head], rest) if rest else None
        return [inner if i == head else v for i, v in enumerate(node) if i != head or inner is not None]
    return None


def _validate(cfg: TableConfig, raw: Mapping[str, Any]) -> None:
    """Check the decoded config, collecting every problem (:func:`_each_problem`); the checks that build
    on others (wagers on decks and commission, spots on the wager names) run only when those passed."""
    found = IssueCollector()
    _each_problem(_validate_table, cfg, found)
    found.raise_if_any()  # without a known game nothing else can be judged
    decks_ok = _each_problem(_validate_decks, cfg, found)
    commission_ok = _each_problem(_validate_commission, cfg, found)
    _each_problem(_validate_money, cfg, found)
    if decks_ok and commission_ok:
        try:
            base_rules = get_game(cfg.game).rules(cfg.decks, None, cfg.commission_rule())
        except RulesError as exc:
            found.issues.extend(_err("decks", str(exc)).issues)
        else:
            _each_problem(lambda c: _validate_wagers(c, base_rules), cfg, found)
    _each_problem(_validate_seats, cfg, found)
    if all(name in _BET_NAMES for name in cfg.wagers):
        _each_problem(_validate_spots, cfg, found)
    for check in (_validate_devices, _validate_mqtt, _validate_integrity, _validate_journal, _validate_round,
                  _validate_burn, _validate_uth, _validate_signage, _validate_metrics):
        _each_problem(check, cfg, found)
    for section, games in _GAME_SECTIONS.items():
        if section in raw and cfg.game not in games:
            found.issues.extend(_err(section, f"[{section}] configures {' and '.join(games)} only; this "
                                     f"table deals {cfg.game} (remove the section)").issues)
    found.raise_if_any()


def _validate_table(cfg: TableConfig) -> None:
    if (problem := table_problem(cfg.table)) is not None:
        raise _err("table", f"{cfg.table!r} {problem}")
    if cfg.game not in GAMES:
        raise _err("game", f"unknown game {cfg.game!r} (choose one of {', '.join(GAMES)})")


def _validate_money(cfg: TableConfig) -> None:
    if not re.fullmatch(r"[A-Z]{3}", cfg.currency):
        raise _err("currency", f"{cfg.currency!r} is not an ISO 4217 code such as 'EUR'")
    if not 0 <= cfg.minor_unit <= 4:
        raise _err("minor_unit", f"{cfg.minor_unit} must be 0 to 4 (digits of the minor unit)")


def _validate_decks(cfg: TableConfig) -> None:
    if cfg.game == "uth":
        if cfg.decks not in (None, 1):
            raise _err("decks", f"uth is dealt from one 52-card deck; decks must be 1, got {cfg.decks}")
    elif cfg.decks is None:
        raise _err("decks", f"{cfg.game} needs the number of decks in the shoe (1 to 8)")
    elif not 1 <= cfg.decks <= 8:
        raise _err("decks", f"must be 1 to 8, got {cfg.decks}")


def _validate_commission(cfg: TableConfig) -> CommissionRule | None:
    if cfg.commission is None:
        return None
    if cfg.game != "baccarat":
        raise _err("commission", f"{cfg.game} takes no commission (only baccarat)")
    c = cfg.commission
    if not RATE_TEXT.fullmatch(c.rate):
        raise _err("commission.rate", f"{c.rate[:40]!r} is not a rate such as '5%', '0.05' or '1/20'")
    try:
        rate = CommissionRule.parse_rate(c.rate)
    except (ValueError, ZeroDivisionError):
        raise _err("commission.rate", f"{c.rate!r} is not a rate such as '5%'") from None
    try:
        mode = RoundingMode(c.rounding)
    except ValueError:
        modes = ", ".join(m.value for m in RoundingMode)
        raise _err("commission.rounding", f"{c.rounding!r} is not one of {modes}") from None
    if c.unit > MAX_MONEY:
        raise _err("commission.unit", f"{c.unit} is above the largest amount {MAX_MONEY}")
    try:
        return CommissionRule(rate, c.unit, mode)
    except ValueError as exc:
        key = "commission.unit" if "unit" in str(exc) else "commission.rate"
        raise _err(key, str(exc)) from None


def _games_offering(bet: Bet) -> list[str]:
    names = []
    for name, game in GAMES.items():
        try:
            rules = game.rules(game.default_decks or 8)
        except RulesError:  # pragma: no cover - every game builds with its defaults
            continue
        if rules.offers(bet):
            names.append(name)
    return names


def _validate_wagers(cfg: TableConfig, base_rules: Any) -> None:
    if not cfg.wagers:
        raise _err("wagers", "no wager is offered; add e.g. [wagers.perfect_pairs]")
    game = get_game(cfg.game)
    for name, w in cfg.wagers.items():
        key = f"wagers.{name}"
        try:
            bet = Bet(name)
        except ValueError:
            choices = ", ".join(b.value for b in Bet)
            raise _err(key, f"unknown wager {name!r} (choose from {choices})") from None
        if not base_rules.offers(bet):
            others = _games_offering(bet)
            where = f" (only {', '.join(others)})" if others else ""
            raise _err(key, f"not offered in {cfg.game}{where}")
        if w.paytable is not None:
            try:
                game.rules(cfg.decks, {name: w.paytable}, cfg.commission_rule())
            except RulesError as exc:
                text = re.sub(rf"^{re.escape(name)}: (paytable )?", "", str(exc))
                raise _err(f"{key}.paytable", text) from None
        if w.min < 1:
            raise _err(f"{key}.min", f"{w.min} must be at least 1 minor unit")
        if w.max < w.min:
            raise _err(f"{key}.max", f"{w.max} is below min {w.min}")
        if w.max > MAX_MONEY:
            raise _err(f"{key}.max", f"{w.max} is above the largest amount {MAX_MONEY} (2**53 - 1 minor "
                       "units, exact in JSON consumers)")
    try:
        odds = wager_odds(cfg.game, game.rules(cfg.decks, cfg.paytables(), cfg.commission_rule()))
    except RulesError as exc:
        raise _err("wagers", str(exc)) from None
    for name, w in cfg.wagers.items():
        bound = max_stake([odds.get(name)])
        if w.max > bound:
            ratio = odds[name]
            raise _err(f"wagers.{name}.max", f"{w.max} at the wager's largest odds ({ratio.numerator} to "
                       f"{ratio.denominator}) pays "
                       f"more than {MAX_MONEY} (2**53 - 1 minor units, exact in JSON consumers): at most "
                       f"{bound}")


def _validate_seats(cfg: TableConfig) -> None:
    if not cfg.seats:
        raise _err("seats", "no seat is configured")
    seen: set[str] = set()
    for i, seat in enumerate(cfg.seats):
        if not _ID.fullmatch(seat):
            raise _err(f"seats[{i}]", f"{seat!r} must be 1-64 letters, digits, '_', '-' or '.'")
        if seat in seen:
            raise _err(f"seats[{i}]", f"seat {seat!r} listed twice")
        seen.add(seat)
        if cfg.game in ("blackjack", "uth") and seat not in {str(n) for n in range(1, 8)}:
            raise _err(f"seats[{i}]", f"{cfg.game} seats are boxes '1' to '7', got {seat!r}")


def _validate_spots(cfg: TableConfig) -> None:
    if not cfg.spots:
        raise _err("spots", "no bet-pad spot is mapped")
    seats = set(cfg.seats)
    mapped: dict[tuple[str, str, str | None], str] = {}
    baccarat = cfg.game in ("baccarat", "ez-baccarat")
    for spot, s in cfg.spots.items():
        key = f"spots.{spot}"
        if not _ID.fullmatch(spot):
            raise _err(key, "a spot id must be 1-64 letters, digits, '_', '-' or '.'")
        if s.seat not in seats:
            raise _err(f"{key}.seat", f"{s.seat!r} is not in seats")
        if s.bet not in cfg.wagers:
            raise _err(f"{key}.bet", f"{s.bet!r} is not an offered wager (see [wagers])")
        bet = Bet(s.bet)
        if s.hand is not None:
            try:
                hand = Hand(s.hand)
            except ValueError:
                raise _err(f"{key}.hand", f"{s.hand!r} is not 'player' or 'banker'") from None
            if not baccarat or bet not in _HAND_BETS:
                raise _err(f"{key}.hand", f"{s.bet} names no hand in {cfg.game}")
            del hand
        elif baccarat and bet in _HAND_BETS:
            raise _err(f"{key}.hand", f"{s.bet} is placed on a hand: give hand = 'player' or 'banker'")
        if s.nominal_stake is not None:
            limits = cfg.wagers[s.bet]
            if not limits.min <= s.nominal_stake <= limits.max:
                raise _err(f"{key}.nominal_stake", f"{s.nominal_stake} is outside the {s.bet} limits "
                           f"{limits.min}-{limits.max}")
        ident = (s.seat, s.bet, s.hand)
        if ident in mapped:
            raise _err(key, f"mapped twice (also spots.{mapped[ident]})")
        mapped[ident] = spot


def control_problem(value: str) -> str | None:
    """``"holds the control character U+0000"`` when ``value`` (a path, a host) holds one, else ``None``:
    the operating system refuses a NUL in a path (Python raises ``ValueError``), and no other control
    character belongs in a path or a host name."""
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    return None if bad is None else f"holds the control character U+{ord(bad):04X}"


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot name a broker, else ``None``: a control character or a space, or a name that
    is not an IP address and that the resolver cannot encode (IDNA: labels of 1-63 characters, at most
    253 in all), which would fail every connection attempt the same way."""
    if (problem := control_problem(host)) is not None:
        return problem
    if any(c.isspace() for c in host):
        return "holds a space"
    if ":" in host:  # an IPv6 literal (a zone such as %eth0 allowed); the resolver judges the rest
        return None
    try:
        encoded = host.encode("idna")
    except UnicodeError as exc:
        return f"is not a host name ({exc})"
    if len(encoded.rstrip(b".")) > 253:
        return "is not a host name (longer than 253 characters)"
    return None


def _validate_devices(cfg: TableConfig) -> None:
    shoes = []
    for name, d in cfg.devices.items():
        key = f"devices.{name}"
        if not _ID.fullmatch(name):
            raise _err(key, "a device name must be 1-64 letters, digits, '_', '-' or '.'")
        if not d.url.strip():
            raise _err(f"{key}.url", "empty")
        if (problem := url_problem(d.url)) is not None:
            raise _err(f"{key}.url", f"{d.url[:80]!r}: {problem}")
        if not d.protocol.strip():
            raise _err(f"{key}.protocol", "empty")
        try:
            get_codec(d.protocol)
        except UnknownProtocol as exc:
            raise _err(f"{key}.protocol", str(exc)) from None
        if not 50 <= d.baud <= 4_000_000:
            raise _err(f"{key}.baud", f"{d.baud} is not a baud rate")
        if d.stale_reconnect is not None and not 0 <= d.stale_reconnect <= MAX_STALE_RECONNECT:
            raise _err(f"{key}.stale_reconnect", f"{d.stale_reconnect:g} must be 0 (never) to "
                                                 f"{MAX_STALE_RECONNECT:g} seconds")
        if d.role == "shoe":
            shoes.append(name)
    if len(shoes) > 1:
        raise _err(f"devices.{shoes[1]}.role", f"a table has one shoe (also devices.{shoes[0]})")


def _validate_mqtt(cfg: TableConfig) -> None:
    m = cfg.mqtt
    if not m.host.strip():
        raise _err("mqtt.host", "empty")
    if (problem := host_problem(m.host)) is not None:
        raise _err("mqtt.host", f"{m.host[:80]!r} {problem}")
    for key, value in (("mqtt.credentials_file", m.credentials_file),
                       ("mqtt.tls.ca_file", m.tls.ca_file if m.tls else None),
                       ("mqtt.tls.cert_file", m.tls.cert_file if m.tls else None),
                       ("mqtt.tls.key_file", m.tls.key_file if m.tls else None)):
        if value is not None and (problem := control_problem(value)) is not None:
            raise _err(key, f"{value[:80]!r} {problem}")
    if not 1 <= m.port <= 65535:
        raise _err("mqtt.port", f"{m.port} is not a TCP port")
    if (problem := prefix_problem(m.topic_prefix)) is not None:
        raise _err("mqtt.topic_prefix", f"{m.topic_prefix!r} {problem}")
    if m.client_id is not None and not 1 <= len(m.client_id) <= 128:
        raise _err("mqtt.client_id", "must be 1 to 128 characters")
    if not 0 <= m.session_expiry <= MAX_SESSION_EXPIRY:
        raise _err("mqtt.session_expiry", f"{m.session_expiry} must be 0 to {MAX_SESSION_EXPIRY} seconds "
                   "(a four-byte MQTT field; the largest means never expire)")
    if not 5 <= m.keepalive <= 3600:
        raise _err("mqtt.keepalive", f"{m.keepalive} must be 5 to 3600 seconds")
    if not 1 <= m.command_rate <= 1000:
        raise _err("mqtt.command_rate", f"{m.command_rate} must be 1 to 1000 commands a second")
    if not 1 <= m.command_burst <= 10_000:
        raise _err("mqtt.command_burst", f"{m.command_burst} must be 1 to 10000 commands")
    if not 1024 <= m.max_message_bytes <= 268_435_455:
        raise _err("mqtt.max_message_bytes", f"{m.max_message_bytes} must be 1024 to 268435455 bytes (the "
                   "broker's message_size_limit)")
    if not 1 <= m.command_max_age <= 300:
        raise _err("mqtt.command_max_age", f"{m.command_max_age} must be 1 to 300 seconds")
    from tablesense.daemon.table.machine import MAX_REMEMBERED_COMMANDS  # the machine imports this module

    window = m.command_burst + m.command_rate * m.command_max_age
    if window > MAX_REMEMBERED_COMMANDS:
        raise _err("mqtt.command_rate", "command_burst + command_rate x command_max_age is "
                   f"{window} commands within one command's validity, more than the "
                   f"{MAX_REMEMBERED_COMMANDS} command ids the table remembers: a repeated command id "
                   "could be applied again; lower command_rate, command_burst or command_max_age")
    if m.tls is not None and (m.tls.cert_file is None) != (m.tls.key_file is None):
        raise _err("mqtt.tls", "cert_file and key_file go together")


def _validate_integrity(cfg: TableConfig) -> None:
    try:
        parse_threshold(cfg.integrity.advantage_threshold)
    except ValueError as exc:
        raise _err("integrity.advantage_threshold", str(exc).removeprefix("advantage_threshold: ")) from None


def _validate_journal(cfg: TableConfig) -> None:
    if not cfg.journal.directory.strip():
        raise _err("journal.directory", "empty")
    if not cfg.journal.key_file.strip():
        raise _err("journal.key_file", "empty (an absolute path, or a systemd credential name)")
    for key, value in (("journal.directory", cfg.journal.directory),
                       ("journal.key_file", cfg.journal.key_file)):
        if (problem := control_problem(value)) is not None:
            raise _err(key, f"{value[:80]!r} {problem}")
    try:
        size = parse_size(cfg.journal.max_size)
    except ValueError as exc:
        raise _err("journal.max_size", str(exc)) from None
    if size and not 1 << 20 <= size <= 1 << 50:
        raise _err("journal.max_size", f"{size} bytes must be 0 (no bound) or from 1 MiB to 1 PiB")
    if not 0 <= cfg.journal.retention_days <= 100_000:
        raise _err("journal.retention_days", f"{cfg.journal.retention_days} must be 0 to 100000")
    if cfg.journal.retention_rounds > 1_000_000_000:
        raise _err("journal.retention_rounds", f"{cfg.journal.retention_rounds} must be at most 1000000000")
    if cfg.journal.retention_rounds < 10:
        raise _err("journal.retention_rounds", f"{cfg.journal.retention_rounds} must be at least 10 (game "
                   "recall keeps the current round and the 9 before it)")


def _validate_round(cfg: TableConfig) -> None:
    if cfg.round.stall_seconds != 0 and not 10 <= cfg.round.stall_seconds <= 86_400:
        raise _err("round.stall_seconds", f"{cfg.round.stall_seconds} must be 0 (off) or 10 to 86400 seconds")


def _validate_signage(cfg: TableConfig) -> None:
    if cfg.signage.language not in SIGNAGE_LANGUAGES:
        raise _err("signage.language", f"{cfg.signage.language[:40]!r} is not a display language "
                   f"(choose {', '.join(SIGNAGE_LANGUAGES)})")


def _validate_burn(cfg: TableConfig) -> None:
    b = cfg.burn
    if b.mode == "fixed" and not 1 <= b.count <= 52 * cfg.shoe_decks:
        raise _err("burn.count", f"{b.count} must be 1 to {52 * cfg.shoe_decks} with mode 'fixed'")
    if b.mode != "fixed" and b.count != 0:
        raise _err("burn.count", f"only used with mode 'fixed' (mode is {b.mode!r})")


def _validate_uth(cfg: TableConfig) -> None:
    if not 0 <= cfg.uth.burn_before_board <= 5:
        raise _err("uth.burn_before_board", f"{cfg.uth.burn_before_board} must be 0 to 5")


def _validate_metrics(cfg: TableConfig) -> None:
    m = cfg.metrics
    if m.listen is not None:
        host, sep, port = m.listen.rpartition(":")
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise _err("metrics.listen", f"{m.listen!r} is not HOST:PORT")
        if not is_loopback(host):
            raise _err("metrics.listen", f"{host!r} is not a loopback address (127.0.0.1, ::1): the metrics "
                       "are for this machine; expose them through an agent or use metrics.textfile")
    if m.textfile is not None and (not m.textfile.startswith("/") or not m.textfile.endswith(".prom")):
        raise _err("metrics.textfile", f"{m.textfile!r} must be an absolute path ending in .prom "
                   "(node_exporter reads only *.prom files)")
    if not 1 <= m.interval <= 3600:
        raise _err("metrics.interval", f"{m.interval} must be 1 to 3600 seconds")
