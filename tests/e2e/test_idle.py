"""The local stack survives an idle period longer than the function's timeout, as Lambda does.

cargo lambda watch (1.9.2) answers an idle instance's /next without a request id once its
--timeout has passed, and lambda_runtime 1.5 panics on that: with --timeout set to the template's
Timeout + 5, every instance that idled 35 s died, and the 100,000-message soak's redrive phase
(which idles while it reads the dead-letter queue) ended in invocations timing out. The local
stack now gives cargo lambda watch a day (local/procs.py).
"""

import time

from local.harness import LocalSystem, Producer, verify


def test_a_message_after_an_idle_period_longer_than_the_timeout_is_written(work_dir):
    with LocalSystem(work_dir, visibility_timeout=4, pollers=2) as system:
        idle = system.stack.function.timeout_s + 10
        # The condition under test, not a race: nothing is invoked for longer than the timeout.
        time.sleep(idle)
        producer = Producer(system, seed=3, poison_share=0.0, retry_share=0.0, run_id="idle")
        producer.send(producer.make(5))
        assert system.wait_drained(120), f"queue not drained: {system.depth()}"
        verdict = verify(system, producer.ledger)
        assert verdict.ok and verdict.items_in_table == 5, verdict.summary()
        assert system.trigger.stats.batch_failures == {}, system.trigger.stats.as_dict()
