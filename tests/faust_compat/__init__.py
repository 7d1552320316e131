"""The side-by-side Faust compatibility suite (issue 28): the same small Faust apps (``import faust``)
run under faust-streaming and under agentstream, and what they print and send is compared; Faust's
output is the reference. ``runner.py`` runs every scenario in one process per framework."""
