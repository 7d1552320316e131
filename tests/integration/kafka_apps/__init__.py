"""The example apps (apps/) with names of their own, so runs can share one Kafka cluster.

``TEST_APP_NS`` is put before the app id and every topic name (empty: the example's own names). The
logic is the example's; only the names differ.
"""
