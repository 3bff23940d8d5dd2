"""Table signage: a web page fed by the table's public MQTT topics. See docs/signage.md."""
