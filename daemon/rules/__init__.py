"""The pure rules core: cards, shoes, hands, paytables, settlement and exact odds.

Nothing in this package does I/O, reads a clock or keeps global mutable state.
"""
