"""Hardware simulators: virtual shoe, bet-sensor pads, capture and replay."""
