"""tablesense daemon: rules core, round state machine, journal, MQTT publishing and the command line."""
