"""Every message tablesense publishes, defined once as msgspec Structs.

Each payload is a JSON object with a ``schema`` name (the tag, e.g. ``"tablesense.settlement"``), a
``version``, the ``table``, a table-wide monotonically increasing ``seq`` and a stable ``msg_id`` (both
left ``0``/``""`` by the round state machine and assigned by the journal with
``msgspec.structs.replace``), the ISO-8601 UTC timestamp ``ts`` of the input that caused it, and the
``shoe`` and ``round`` numbers it belongs to. Money is integer minor units; odds are strings such as
``"25 to 1"``; cards are strings such as ``"QH"`` / ``"10D"`` (:class:`daemon.rules.cards.Card` ``str``).

Topics (README.md "MQTT topics"): ``{prefix}/{table}/status`` :class:`TableStatus`, ``round``
:class:`RoundState`,
``results`` :class:`RoundResults`, ``settlements`` :class:`SettlementMessage`, ``alarms``
:class:`AlarmMessage`, ``devices/{name}`` :class:`DeviceStatus`, ``floor/rounds`` :class:`FloorRound`,
``info`` :class:`TableInfo` (retained) and ``scoreboard`` :class:`ScoreboardMessage` (retained, baccarat).
Only :class:`FloorRound` may carry a face-down card (the information barrier); the
state machine decides what is public in one place (:mod:`daemon.table.barrier`).

Consumers decode with unknown fields allowed (msgspec's default), so fields may be added within a
version (msgspec: unknown fields are ignored unless ``forbid_unknown_fields``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

__all__ = [
    "GRID_ROWS",
    "SCOREBOARD_SCHEMA",
    "AlarmMessage",
    "AlarmRecord",
    "BaccaratOutcome",
    "BeadCell",
    "BigRoadCell",
    "BoxResult",
    "CardRecord",
    "CommandRecord",
    "CommissionInfo",
    "DerivedCell",
    "DeviceStatus",
    "FloorRound",
    "HealthMessage",
    "MarkColour",
    "Message",
    "PaytableLine",
    "PublicCard",
    "Roads",
    "RoundResults",
    "RoundState",
    "ScoreboardMessage",
    "SettlementMessage",
    "SettlementRecord",
    "ShoeStats",
    "SpotChangeRecord",
    "SpotInfo",
    "TableInfo",
    "TableStatus",
    "WagerInfo",
    "WagerRecord",
    "Winner",
    "decode_message",
    "encode_message",
    "message_types",
    "schema_names",
]


class Message(msgspec.Struct, kw_only=True, frozen=True, tag_field="schema"):
    """Common header of every published payload.

    Attributes:
        version: payload version within the schema name (only optional fields are added within one).
        table: the table id from the config.
        seq: table-wide monotonic sequence number (assigned by the journal; 0 until then).
        msg_id: stable id for de-duplication (assigned by the journal; "" until then).
        ts: ISO-8601 UTC time of the input that caused this message (never the publisher's clock).
        shoe: shoe number, or ``None`` when not about a shoe.
        round: round number within the shoe, or ``None`` when not about a round.
    """

    version: int = 1
    table: str
    seq: int = 0
    msg_id: str = ""
    ts: str
    shoe: int | None = None
    round: int | None = None


# --- embedded records --------------------------------------------------------------------------


class PublicCard(msgspec.Struct, kw_only=True, frozen=True):
    """A face-up card as signage may show it.

    Attributes:
        index: draw order within the round, 1-based (counts every card out of the shoe in the round).
        card: the card, e.g. ``"QH"``.
        position: ``player``/``banker`` (baccarat), a box or seat number ``"1"``-``"7"``, ``dealer``
            or ``board`` (UTH community cards).
    """

    index: int
    card: str
    position: str


class CardRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One card out of the shoe in the floor record (may be face down).

    Attributes:
        index: draw order within the round, 1-based (burns before the round have their own list).
        card: the card, or ``None`` while unreadable and not yet entered by a supervisor.
        position: where it went (see :class:`PublicCard`), ``burn``, or ``None`` when it joined no hand.
        face_up: dealt face up (else face down: blackjack hole card, UTH hands and board).
        status: every value the round state machine writes:
            ``dealt``: placed where the game's order puts it;
            ``entered``: typed in by a supervisor (``enter_card``: an unreadable card, a card the
            device lost, the real value of a misread one);
            ``unreadable``: left the shoe unread and still unknown;
            ``set_aside``: joined no hand (an extra card, a card the shoe cannot hold, a card carrying
            a sequence gap, a re-read set aside by ``rescan``);
            ``re_entered``: a set-aside card whose value a supervisor entered: the entered card, listed
            as ``entered``, took its place (an unreadable one is counted out as that card);
            ``queued``: drawn while an earlier card waited for the supervisor, not placed yet;
            ``possible_rescan``: equal to the card read last before the shoe lost its link or
            restarted, waiting for ``rescan``;
            ``burned``: a burn card (every card in ``burns``, and in ``cards`` UTH's
            ``burn_before_board`` burns).
            A complete record has ``unreadable``, ``queued`` or ``possible_rescan`` cards only when the
            round was voided before the supervisor resolved them.
        ts: ISO-8601 UTC time of the input.
        device: the device name, or ``None`` for a card entered by command.
        device_seq: the device's own sequence number, or ``None``.
        alarm_id: the alarm raised about this card, if any.
    """

    index: int
    card: str | None
    position: str | None
    face_up: bool
    status: str
    ts: str
    device: str | None = None
    device_seq: int | None = None
    alarm_id: str | None = None


class WagerRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A wager locked from the bet-pad snapshot at no-more-bets.

    Attributes:
        spot: bet-pad spot id; seat/bet/hand from the config's spot map.
        stake: minor units (the sensed amount, or the spot's nominal stake on presence-only pads).
        presence_only: the pad sensed presence only (the stake is the configured nominal stake).
    """

    spot: str
    seat: str
    bet: str
    hand: str | None
    stake: int
    presence_only: bool = False


class CommissionInfo(msgspec.Struct, kw_only=True, frozen=True):
    """The Banker commission rule in force (standard baccarat; 58 Pa. Code § 631a.13 vigorish, rules.md
    §1.7): what a winning Banker wager pays less, and how the amount is rounded.

    Attributes:
        rate: percent of the amount won, e.g. ``"5%"`` (exact; ``"2.5%"``, or a fraction such as
            ``"1/30"`` when it has no short decimal form).
        unit: the rounding unit in minor units (1: to the cent; 100: to the whole dollar).
        rounding: ``half_up`` (to the nearest unit, halves up), ``up``, ``down`` or ``half_even``.
        text: the rule in one English line for people, e.g. ``"5% commission on Banker wins, rounded up
            to $1"`` (signage composes its own text in the display's language from the fields above).
    """

    rate: str
    unit: int
    rounding: str
    text: str


class SettlementRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A settled wager as kept in the floor record (same fields as :class:`SettlementMessage`)."""

    spot: str
    seat: str
    bet: str
    hand: str | None
    stake: int
    outcome: str
    category: str
    odds: str | None
    net: int
    commission: int
    changed_after_lock: bool
    ts: str
    commission_rule: CommissionInfo | None = None


class AlarmRecord(msgspec.Struct, kw_only=True, frozen=True):
    """An alarm as kept in the floor record (same fields as :class:`AlarmMessage`)."""

    alarm_id: str
    code: str
    severity: str
    text: str
    state: str
    held: bool
    ts: str
    seat: str | None = None
    spot: str | None = None
    device: str | None = None
    count: int = 1


class SpotChangeRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A bet-pad spot change seen during the round (``after_lock``: a past-post or presence change)."""

    ts: str
    device: str
    device_seq: int
    spot: str
    state: str
    amount: int | None
    after_lock: bool


class CommandRecord(msgspec.Struct, kw_only=True, frozen=True):
    """An operator command applied to (or refused for) the round, with who sent it and its
    ``command_id`` (``""`` for commands journaled before command ids existed)."""

    ts: str
    name: str
    args: dict[str, str]
    operator: str
    ok: bool
    reason: str
    command_id: str = ""


class BaccaratOutcome(msgspec.Struct, kw_only=True, frozen=True):
    """The coup of a baccarat round (58 Pa. Code § 631a.11; natural and Dragon 7/Panda 8 per § 627a.1).

    Attributes:
        player, banker: the hand's cards in draw order.
        player_total, banker_total: point counts 0-9.
        winner: ``player``, ``banker`` or ``tie``.
        player_pair, banker_pair: the hand's first two cards are of identical rank (§ 627c.1(b)).
    """

    player: tuple[str, ...]
    banker: tuple[str, ...]
    player_total: int
    banker_total: int
    winner: str
    player_natural: bool
    banker_natural: bool
    player_pair: bool
    banker_pair: bool
    dragon_7: bool = False
    panda_8: bool = False


class BoxResult(msgspec.Struct, kw_only=True, frozen=True):
    """A blackjack box or UTH seat after settlement: its first two cards and their pair grade.

    ``pair`` is the settled category of its pair wager (e.g. ``perfect_pair``, ``ace_king_suited``,
    ``no_pair``/``lose``), or the plain pair grade when the box held no pair wager, or ``None``.
    """

    position: str
    cards: tuple[str, ...]
    pair: str | None = None


# --- published messages -------------------------------------------------------------------------


class TableStatus(Message, frozen=True, tag="tablesense.status"):
    """Retained availability of tablesense for the table, also its birth message and last will.

    Attributes:
        state: ``online``, ``offline`` (clean stop, or the will), ``refusing`` (up, settling nothing: the
            journal is damaged) or ``standby`` (a second live instance for this table that stepped back).
        detail: why, in one line (journal failure, the other instance...), else empty.
        software: the tablesense version (package metadata).
        instance: 16 hex digits drawn at process start; the will carries the same.
        config_digest: SHA-256 (hex) of the config file's bytes.
        epoch: the journal's epoch (part of every ``msg_id``; a new epoch is a new journal).
        last_seq: the last ``seq`` journaled when this status was made: a consumer that has seen less
            asks for the rest with the ``replay`` command.
        chain_seq, chain_head: the journal's hash chain head (64 hex) and the highest ``seq`` it covers.
    """

    state: str
    detail: str = ""
    software: str = ""
    instance: str = ""
    config_digest: str = ""
    epoch: str = ""
    last_seq: int = 0
    chain_seq: int = 0
    chain_head: str = ""


class HealthMessage(Message, frozen=True, tag="tablesense.health"):
    """Retained on ``{prefix}/{table}/health`` every 30 s and at every connection: the essentials of the
    daemon's Prometheus metrics (:mod:`daemon.metrics`), for consumers that do not scrape. Not journaled
    (``seq`` 0, ``msg_id`` empty), like the status. Counts are since the daemon started.

    Attributes:
        software: the package version. uptime_s: seconds since the daemon started.
        inputs: inputs applied and journaled (device events and commands).
        frames_rejected: by reason (``checksum``, ``malformed``, ``too_long``, ``unknown_type``,
            ``duplicate``, ``gap``, ``resend``); garbage_bytes: bytes outside any frame.
        devices: device name -> ``online`` or ``down``.
        settlements: wagers settled. alarms: alarms raised. open_holds: alarm codes holding the round.
        outbox_backlog: journaled messages not yet acknowledged by the broker.
        relay_reconnects: connections after the first. publish_rejected: negative PUBACKs.
        journal_bytes: journal file and WAL size.
        journal_commit_ms_mean, card_to_publish_ms_mean: means over the last interval (milliseconds),
            ``None`` when nothing was journaled or published in it.
    """

    software: str
    uptime_s: int
    inputs: int
    frames_rejected: dict[str, int]
    garbage_bytes: int
    devices: dict[str, str]
    settlements: int
    alarms: int
    open_holds: int
    outbox_backlog: int
    relay_reconnects: int
    publish_rejected: int
    journal_bytes: int
    journal_commit_ms_mean: float | None = None
    card_to_publish_ms_mean: float | None = None


class RoundState(Message, frozen=True, tag="tablesense.round"):
    """Retained public state of the current round: only face-up cards, never a face-down one.

    Attributes:
        game: ``baccarat``, ``ez-baccarat``, ``blackjack`` or ``uth``.
        phase: see docs/state-machine.md (``burn``, ``betting``, ``dealing``, ``playing``, ``reveal``,
            ``complete``, ``shoe_end``).
        cards: the revealed cards in draw order.
        held: the round is held for a supervisor (it settles nothing while held).
        hold_codes: alarm codes holding the round.
        cards_remaining: cards left in the shoe (unreadable cards counted as out).
        penetration: fraction of the shoe dealt, 0.0-1.0, four decimals (a display figure, not money).
        cut_card: the cut card has come out of this shoe.
        last_round: this is the shoe's last round (rules.md §1.3).
        void: the round was voided (every unsettled wager returned).
        revealed: the face-down cards have been revealed (UTH: the dealer's reveal button).
    """

    game: str
    phase: str
    cards: tuple[PublicCard, ...] = ()
    held: bool = False
    hold_codes: tuple[str, ...] = ()
    cards_remaining: int = 0
    penetration: float = 0.0
    cut_card: bool = False
    last_round: bool = False
    void: bool = False
    revealed: bool = False


class RoundResults(Message, frozen=True, tag="tablesense.results"):
    """One per round, for signage and scoreboards; a void round is marked and counts in no statistics.

    Attributes:
        void: the round was voided (every unsettled wager returned).
        void_reason: why, for players and the floor, when void: ``"void button"`` (the dealer's),
            ``"voided by the floor"`` (a supervisor's ``void_round`` without a reason), the supervisor's
            reason (e.g. ``"misdeal"``), or ``"new shoe mid-round"``; never an operator's identity.
        baccarat: the coup (baccarat games), ``None`` when void before it was known.
        boxes: per-box (blackjack) or per-seat (UTH) pair results.
        dealer: the dealer's public cards (blackjack: the up card only; UTH: both, after the reveal).
        board: UTH community cards (after the reveal).
    """

    game: str
    void: bool = False
    baccarat: BaccaratOutcome | None = None
    boxes: tuple[BoxResult, ...] = ()
    dealer: tuple[str, ...] = ()
    board: tuple[str, ...] = ()
    void_reason: str | None = None


class SettlementMessage(Message, frozen=True, tag="tablesense.settlement"):
    """One settled wager (QoS 1), published at the moment the rules decide it.

    Attributes:
        spot, seat, bet, hand: where the wager stood (``hand`` only for baccarat hand wagers).
        stake: the locked stake in minor units.
        outcome: ``win``, ``lose``, ``push`` or ``void`` (stake returned).
        category: what decided it (``perfect_pair``, ``natural_win``, ``ineligible_no_blackjack_wager`` ...).
        odds: odds paid on a win, e.g. ``"25 to 1"``, else ``None``.
        net: signed minor units for the player (winnings less commission, ``-stake`` on a loss).
        commission: minor units of commission on a Banker win (owed, § 631a.13).
        commission_rule: on every Banker wager at a table that takes commission, the rule the
            commission was computed by (rate and rounding), whatever the outcome; else ``None``.

    Whether the spot changed after the wagers were locked (past-posting) is not here: signage reads
    this topic, so it is only in the floor record (:class:`SettlementRecord` ``changed_after_lock``)
    and the alarm, which the floor reads.
    """

    spot: str
    seat: str
    bet: str
    hand: str | None
    stake: int
    outcome: str
    category: str
    odds: str | None
    net: int
    commission: int = 0
    commission_rule: CommissionInfo | None = None


class AlarmMessage(Message, frozen=True, tag="tablesense.alarm"):
    """An irregularity with a stable ``code`` (docs/state-machine.md, alarm codes).

    Attributes:
        alarm_id: ``"{shoe}.{n}"``, the n-th alarm of the shoe (the id ``ack_alarm`` names).
        code: stable alarm code, e.g. ``CARD_NOT_IN_SHOE``.
        severity: ``info``, ``warning`` or ``critical``.
        text: one line for people; never names a face-down card.
        state: ``raised``, ``acknowledged`` or ``cleared``.
        held: the round is held because of this alarm.
        count: how many times this irregularity happened on this round (repeats are coalesced into
            the open alarm: its ``raised`` message is sent again at counts 2, 4, 8, ..., and the
            final count is in its ``acknowledged``/``cleared`` message).
    """

    alarm_id: str
    code: str
    severity: str
    text: str
    state: str = "raised"
    held: bool = False
    seat: str | None = None
    spot: str | None = None
    device: str | None = None
    count: int = 1


class DeviceStatus(Message, frozen=True, tag="tablesense.device"):
    """Retained link state of one device (``connecting``, ``online``, ``stale``, ``disconnected``)."""

    name: str
    state: str
    detail: str = ""


class FloorRound(Message, frozen=True, tag="tablesense.floor_round"):
    """The complete round record for the floor system and game recall, published once the round is
    complete. It carries every card in draw order with where it went, including face-down cards.

    Attributes:
        cards: every card out of the shoe during the round, in draw order.
        burns: cards burned since the previous round (start-of-shoe burn) or during it.
        wagers: the wagers locked at no-more-bets.
        settlements: every settlement of the round.
        alarms: every alarm raised during the round.
        spot_changes: every spot change during the round (``after_lock`` marks past-posting).
        commands: operator commands about the round, the one that completes it included (a void, an
            entry, an acknowledgement).
        baccarat, boxes, dealer, board: the full results (dealer includes the hole card).
        opened_ts, locked_ts, completed_ts: ISO-8601 UTC times of betting open, lock, completion.
        chain_seq, chain_head: the journal's hash chain just before this record's own row: the highest
            ``seq`` the head covers and the head (64 hex digits, HMAC-SHA256; docs/journal.md). A floor
            system keeps them: ``tablesense verify --head SEQ:HEAD`` later proves the table's journal
            still holds that exact history (filled in by the journal, like ``seq`` and ``msg_id``).
        cards_omitted, spot_changes_omitted, alarms_omitted, commands_omitted: how many set-aside cards,
            spot changes, alarm records and commands were left out of this record (from the middle of
            each list: the first and the last are kept) so that the encoded record stays within
            192 KiB, below the broker's 256 KiB ``message_size_limit`` (a shoe repeating a card, a pad
            flapping, a held round). A dealt card is never left out; the journal keeps every input and
            ``tablesense recall`` rebuilds the round from it. 0 (the usual case): nothing left out.
    """

    game: str
    void: bool = False
    cards: tuple[CardRecord, ...] = ()
    burns: tuple[CardRecord, ...] = ()
    wagers: tuple[WagerRecord, ...] = ()
    settlements: tuple[SettlementRecord, ...] = ()
    alarms: tuple[AlarmRecord, ...] = ()
    spot_changes: tuple[SpotChangeRecord, ...] = ()
    commands: tuple[CommandRecord, ...] = ()
    baccarat: BaccaratOutcome | None = None
    boxes: tuple[BoxResult, ...] = ()
    dealer: tuple[str, ...] = ()
    board: tuple[str, ...] = ()
    opened_ts: str | None = None
    locked_ts: str | None = None
    completed_ts: str | None = None
    chain_seq: int = 0
    chain_head: str = ""
    cards_omitted: int = 0
    spot_changes_omitted: int = 0
    alarms_omitted: int = 0
    commands_omitted: int = 0


# --- table info (signage) -------------------------------------------------------------------------


class PaytableLine(msgspec.Struct, kw_only=True, frozen=True):
    """One line of a wager's paytable as signage shows it.

    Attributes:
        category: what wins, e.g. ``perfect_pair``, ``tie``, ``win_by_9`` (the settlement's category;
            ``paytable`` when only the paytable's name is known).
        label: the category for people, e.g. ``"Perfect Pair"``.
        odds: e.g. ``"25 to 1"`` (exact, from the rules core), ``"push"`` (the stake is returned), or
            the paytable's name.
    """

    category: str
    label: str
    odds: str


class WagerInfo(msgspec.Struct, kw_only=True, frozen=True):
    """A wager the table offers, with its paytable and its table limits (integer minor units)."""

    bet: str
    label: str
    paytable_name: str | None = None
    paytable: tuple[PaytableLine, ...] = ()
    min: int
    max: int


class SpotInfo(msgspec.Struct, kw_only=True, frozen=True):
    """A bet-pad spot: the seat (box), the wager and, for baccarat hand wagers, the hand it stands for."""

    spot: str
    seat: str
    bet: str
    hand: str | None = None


class TableInfo(Message, frozen=True, tag="tablesense.table_info"):
    """Retained public description of the table on ``{prefix}/{table}/info``, for signage: what is
    offered and at what limits. Published at start and at every new shoe. Public data only: no devices,
    broker, journal or credentials.

    Attributes:
        game: ``baccarat``, ``ez-baccarat``, ``blackjack`` or ``uth``.
        decks: decks in the shoe.
        currency: ISO 4217 code, e.g. ``"EUR"``; ``minor_unit``: digits of the minor unit (2: cents).
        wagers: the side wagers offered (Perfect Pairs, Tie, Dragon 7 ...), with paytable and limits.
        main_wagers: the main wagers (Player, Banker, blackjack, Ante), with their limits and, for the
            wagers tablesense settles (Player, Banker), their odds lines.
        commission: the Banker commission rate, e.g. ``"5%"`` (baccarat with commission), else ``None``.
        commission_rule: the whole commission rule (rate, rounding unit and direction), else ``None``.
        seats: the seats (boxes) in order; spots: the bet-pad spots and what each stands for.
        language: the displays' default language (``[signage] language``: ``en``, ``zh-Hans`` or
            ``zh-Hant``); each display may choose another (docs/signage.md).
    """

    game: str
    decks: int
    currency: str
    minor_unit: int
    wagers: tuple[WagerInfo, ...] = ()
    main_wagers: tuple[WagerInfo, ...] = ()
    commission: str | None = None
    seats: tuple[str, ...] = ()
    spots: tuple[SpotInfo, ...] = ()
    commission_rule: CommissionInfo | None = None
    language: str = "en"


# --- the baccarat scoreboard (daemon.scoreboard builds it) ----------------------------------------

GRID_ROWS = 6
"""Rows of every road's drawn grid (rules.md §5.2: bead plate and Big Road are 6 rows high)."""

SCOREBOARD_SCHEMA = "tablesense.scoreboard"
"""Schema name (the ``schema`` tag) of :class:`ScoreboardMessage`."""


class Winner(StrEnum):
    """The result of a baccarat round as the scoreboard records it."""

    BANKER = "banker"
    PLAYER = "player"
    TIE = "tie"


class MarkColour(StrEnum):
    """Colour of a derived-road mark: red = regular/repeating, blue = irregular (rules.md §5.2)."""

    RED = "red"
    BLUE = "blue"



class BeadCell(msgspec.Struct, frozen=True, kw_only=True):
    """One bead-plate cell: one round, ties included. ``total`` is the winning (or tied) point count."""

    col: int
    row: int
    result: Winner
    player_pair: bool = False
    banker_pair: bool = False
    natural: bool = False
    total: int | None = None
    round: int | None = None


class BigRoadCell(msgspec.Struct, frozen=True, kw_only=True):
    """One Big Road cell (a Banker or Player win).

    ``col``/``row`` are the drawn position; ``streak`` (1-based logical column) and ``depth`` (1-based
    logical row within the streak) are what the derived roads use. ``ties`` counts the ties drawn as a
    green slash through this cell (ties after it, plus leading ties for the first cell).
    """

    col: int
    row: int
    winner: Winner
    streak: int
    depth: int
    ties: int = 0
    player_pair: bool = False
    banker_pair: bool = False
    natural: bool = False
    round: int | None = None


class DerivedCell(msgspec.Struct, frozen=True, kw_only=True):
    """One mark of a derived road; ``big_road_streak``/``big_road_depth`` name the Big Road cell it marks."""

    col: int
    row: int
    colour: MarkColour
    big_road_streak: int
    big_road_depth: int


class ShoeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counts over the shoe's non-void rounds; ``cards_remaining`` is ``None`` when unknown."""

    rounds: int = 0
    banker: int = 0
    player: int = 0
    tie: int = 0
    player_pair: int = 0
    banker_pair: int = 0
    naturals: int = 0
    cards_remaining: int | None = None


class Roads(msgspec.Struct, frozen=True, kw_only=True):
    """The whole scoreboard of one shoe: the five roads and the shoe statistics.

    ``rows`` is the grid height (6). ``leading_ties`` is the number of ties before the first Banker or
    Player result (also counted on the first Big Road cell once it exists).
    """

    shoe: int | None = None
    rows: int = GRID_ROWS
    bead_plate: list[BeadCell] = msgspec.field(default_factory=list)
    big_road: list[BigRoadCell] = msgspec.field(default_factory=list)
    big_eye_boy: list[DerivedCell] = msgspec.field(default_factory=list)
    small_road: list[DerivedCell] = msgspec.field(default_factory=list)
    cockroach_pig: list[DerivedCell] = msgspec.field(default_factory=list)
    leading_ties: int = 0
    stats: ShoeStats = msgspec.field(default_factory=ShoeStats)


class ScoreboardMessage(Message, frozen=True, tag=SCOREBOARD_SCHEMA):
    """The retained message on ``{prefix}/{table}/scoreboard`` (schema ``tablesense.scoreboard``).

    The envelope (``version``, ``table``, ``seq``, ``msg_id``, ``ts``, ``shoe``, ``round``) is the daemon's
    common :class:`Message` header; ``round`` is the round whose results caused it (the last
    round on the board unless that one was void; ``None`` for the empty board of a new shoe); ``roads`` is
    the whole board (:class:`Roads`). The state machine publishes it retained after every baccarat round
    and at every new shoe.
    """

    roads: Roads


_MESSAGE_TYPES: tuple[type[Message], ...] = (
    TableStatus, RoundState, RoundResults, SettlementMessage, AlarmMessage, DeviceStatus, FloorRound,
    TableInfo, ScoreboardMessage, HealthMessage)

AnyMessage = (TableStatus | RoundState | RoundResults | SettlementMessage | AlarmMessage | DeviceStatus
              | FloorRound | TableInfo | ScoreboardMessage | HealthMessage)
"""Tagged union of every published message (decode by its ``schema`` field)."""

_ENCODER = msgspec.json.Encoder()
_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyMessage)


def message_types() -> tuple[type[Message], ...]:
    """Every published message class, e.g. to generate JSON Schemas with ``msgspec.json.schema``."""
    return _MESSAGE_TYPES


def schema_names() -> dict[str, type[Message]]:
    """``{schema name: class}``, e.g. ``{"tablesense.round": RoundState, ...}``."""
    out: dict[str, type[Message]] = {}
    for cls in _MESSAGE_TYPES:
        tag = cls.__struct_config__.tag
        assert isinstance(tag, str)
        out[tag] = cls
    return out


def encode_message(message: Message) -> bytes:
    """The JSON payload of ``message`` (UTF-8 bytes, with its ``schema`` tag)."""
    return _ENCODER.encode(message)


def decode_message(payload: bytes | str) -> Message:
    """Decode a payload produced by :func:`encode_message` (unknown fields ignored).

    Raises:
        msgspec.ValidationError / msgspec.DecodeError: not a tablesense message.
    """
    msg: Message = _DECODER.decode(payload)
    return msg
