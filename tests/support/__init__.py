"""Reusable test tools (not part of the agentstream package): the broker fault proxy, bounded waiting."""
