"""Alarm codes: the stable names of every irregularity the round state machine reports
(docs/state-machine.md, alarm codes).

Each code has a fixed severity and says whether it holds the round in play (a held round settles
nothing until a supervisor releases it: ``ack_alarm``, ``enter_card`` for an unreadable card, or
``void_round``). The table is documented in docs/state-machine.md; a test checks that every code is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ALARMS", "AlarmCode", "AlarmSpec", "Severity"]


class Severity(StrEnum):
    """How urgent an alarm is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class AlarmCode(StrEnum):
    """Stable alarm codes (never renamed; new ones may be added)."""

    CARD_NOT_IN_SHOE = "CARD_NOT_IN_SHOE"
    EXTRA_CARD = "EXTRA_CARD"
    CARD_UNREADABLE = "CARD_UNREADABLE"
    SEQUENCE_GAP = "SEQUENCE_GAP"
    PAST_POSTING = "PAST_POSTING"
    PRESENCE_CHANGED_AFTER_LOCK = "PRESENCE_CHANGED_AFTER_LOCK"
    WAGER_LIMIT = "WAGER_LIMIT"
    PP_WITHOUT_BLACKJACK = "PP_WITHOUT_BLACKJACK"
    DEVICE_LOST = "DEVICE_LOST"
    DEVICE_ERROR = "DEVICE_ERROR"
    CUT_CARD = "CUT_CARD"
    SHOE_EXHAUSTED = "SHOE_EXHAUSTED"
    ROUND_VOID = "ROUND_VOID"
    UNKNOWN_SPOT = "UNKNOWN_SPOT"
    UNEXPECTED_BUTTON = "UNEXPECTED_BUTTON"
    LID_OPEN = "LID_OPEN"
    BURN = "BURN"
    ADVANTAGE_PLAY = "ADVANTAGE_PLAY"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    JOURNAL_DAMAGED = "JOURNAL_DAMAGED"
    DEVICE_RESTARTED = "DEVICE_RESTARTED"
    POSSIBLE_RESCAN = "POSSIBLE_RESCAN"
    DEAL_STALLED = "DEAL_STALLED"
    INPUT_REJECTED = "INPUT_REJECTED"
    DUPLICATE_INSTANCE = "DUPLICATE_INSTANCE"
    WRONG_DEVICE = "WRONG_DEVICE"


@dataclass(frozen=True, slots=True)
class AlarmSpec:
    """A code's severity, whether it holds the round, whether ``ack_alarm`` alone releases that hold,
    and what it means (one line, for docs/state-machine.md)."""

    severity: Severity
    holds: bool
    ack_releases: bool
    meaning: str


ALARMS: dict[AlarmCode, AlarmSpec] = {
    AlarmCode.CARD_NOT_IN_SHOE: AlarmSpec(
        Severity.CRITICAL, True, True,
        "a card the shoe cannot hold (a ninth A♠ in 8 decks, a repeat in one deck): it joins no hand; "
        "mid-deal, later cards queue until the alarm is acknowledged"),
    AlarmCode.EXTRA_CARD: AlarmSpec(
        Severity.CRITICAL, True, True,
        "a card when the rules call for none, or after the round is complete: it joins no hand"),
    AlarmCode.CARD_UNREADABLE: AlarmSpec(
        Severity.CRITICAL, True, False,
        "a card left the shoe unread: a supervisor enters it (enter_card) or voids the round"),
    AlarmCode.SEQUENCE_GAP: AlarmSpec(
        Severity.CRITICAL, True, True,
        "the device's sequence number skipped or went back: events may be lost; the card joins no hand; "
        "mid-deal, later cards queue until the alarm is acknowledged"),
    AlarmCode.PAST_POSTING: AlarmSpec(
        Severity.CRITICAL, False, False,
        "a spot changed after the wagers were locked; the wager is settled at its locked value"),
    AlarmCode.PRESENCE_CHANGED_AFTER_LOCK: AlarmSpec(
        Severity.WARNING, False, False,
        "a presence-only spot changed after lock (not a proven past-post); settled at the locked value"),
    AlarmCode.WAGER_LIMIT: AlarmSpec(
        Severity.WARNING, False, False, "a sensed stake outside the wager's table minimum/maximum"),
    AlarmCode.PP_WITHOUT_BLACKJACK: AlarmSpec(
        Severity.WARNING, False, False,
        "a Perfect Pairs wager on a box with no blackjack wager: returned (Perfect Pairs rule sheet rule 2)"),
    AlarmCode.DEVICE_LOST: AlarmSpec(
        Severity.CRITICAL, True, True,
        "the shoe disconnected mid-round: held until it is back online, or a supervisor voids"),
    AlarmCode.DEVICE_ERROR: AlarmSpec(Severity.WARNING, False, False, "a device reported an error"),
    AlarmCode.CUT_CARD: AlarmSpec(
        Severity.INFO, False, False,
        "the cut card came out: one more round, then the shoe ends (rules.md §1.3)"),
    AlarmCode.SHOE_EXHAUSTED: AlarmSpec(
        Severity.CRITICAL, True, True, "the shoe ran out of cards (or reported empty) mid-round"),
    AlarmCode.ROUND_VOID: AlarmSpec(
        Severity.WARNING, False, False, "the round was voided: every unsettled wager is returned"),
    AlarmCode.UNKNOWN_SPOT: AlarmSpec(
        Severity.WARNING, False, False, "a bet pad reported a spot that is not in the config's spot map"),
    AlarmCode.UNEXPECTED_BUTTON: AlarmSpec(
        Severity.INFO, False, False, "a dealer button that does not apply in the current phase (ignored)"),
    AlarmCode.LID_OPEN: AlarmSpec(Severity.WARNING, False, False, "the shoe's lid was opened mid-round"),
    AlarmCode.BURN: AlarmSpec(
        Severity.WARNING, False, False,
        "a start-of-shoe burn irregularity (unreadable exposed card, impossible burn card)"),
    AlarmCode.INTERNAL_ERROR: AlarmSpec(
        Severity.CRITICAL, True, True,
        "tablesense could not apply an input (a defect): the round is held rather than settled on a guess"),
    AlarmCode.JOURNAL_DAMAGED: AlarmSpec(
        Severity.CRITICAL, True, False,
        "the journal failed its integrity check at start: tablesense applies no device input and settles "
        "nothing until an authorised person moves the file aside and restarts (raised by the app); or, "
        "raised by the MQTT relay without a hold, an old retained message failed its seal when it was "
        "to be republished: it is left out, everything else is delivered (docs/mqtt.md)"),
    AlarmCode.DUPLICATE_INSTANCE: AlarmSpec(
        Severity.CRITICAL, False, False,
        "a second tablesense instance for this table (same table id, e.g. a spare controller left "
        "running) took the MQTT session over; it stepped back to standby: stop it (raised by the app)"),
    AlarmCode.ADVANTAGE_PLAY: AlarmSpec(
        Severity.WARNING, False, False,
        "a pair wager's exact expected return for the next round is above [integrity] "
        "advantage_threshold: watch the side-bet action (docs/advantage-watch.md)"),
    AlarmCode.DEVICE_RESTARTED: AlarmSpec(
        Severity.CRITICAL, True, True,
        "a device announced a new session (it restarted; frames it had not had acknowledged may be "
        "lost): the shoe's restart holds the round, the pads' does not"),
    AlarmCode.POSSIBLE_RESCAN: AlarmSpec(
        Severity.CRITICAL, True, False,
        "after the shoe's link was lost or the shoe restarted mid-round, the first card is the card read "
        "last before: a supervisor decides with rescan (keep it, or set it aside as a re-read)"),
    AlarmCode.DEAL_STALLED: AlarmSpec(
        Severity.WARNING, False, False,
        "no card for [round] stall_seconds while the round's cards are due; cleared by the next card"),
    AlarmCode.INPUT_REJECTED: AlarmSpec(
        Severity.CRITICAL, True, True,
        "applying an input raised (a defect in tablesense): it is journaled as rejected, not applied, and "
        "the round is held rather than settled on a guess"),
    AlarmCode.WRONG_DEVICE: AlarmSpec(
        Severity.CRITICAL, True, True,
        "a device sent an event its role never sends (a card or shoe event from the bet pads, a spot or "
        "dealer button from the shoe; docs/protocol.md §3): not applied, the round held"),
}
"""Every alarm code with its severity and hold behaviour."""
