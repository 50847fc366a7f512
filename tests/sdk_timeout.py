"""The timeout every in-process SDK client of the tests (openai, anthropic, LangChain's) is given.

The SDKs' default gives a connection 5 s (httpx `Timeout(600, connect=5)`): a wall-clock limit
that a stall of the test process expires although the connect to the loopback gateway completed
at once. The loop stood still past the connect's deadline (a long collection, the process
descheduled on a loaded machine); on waking it ran the connect's timer in the same pass as the
socket's readiness, and the timer won. Seen once in CI as "the openai client timed out on turn 1"
of test_failover_moves_the_next_turn_to_another_family[sqlite-kimi-mistral] (a scenario's first
turn is the one that connects), made to happen by
tests/e2e/test_cross_provider.py::test_a_machine_stall_while_turn_1_connects_loses_no_turn.
Every phase gets the SDK's whole-request limit instead: a gateway that is not listening refuses
a loopback connect at once anyway, so nothing waits longer for it.
"""

SDK_TIMEOUT = 600.0  # seconds, every phase (connect included)
