package relay
