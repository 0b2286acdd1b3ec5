"""The broker breaker: a broker that is away costs one failed hand-off, not every request."""

from __future__ import annotations

import logging

from inventory.broker import BrokerBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Broker:
    """A send function that fails while `down`, counting its calls."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionRefusedError("redis://:s3cret@broker:6379/0 refused")


def breaker(clock: Clock, trials: list) -> BrokerBreaker:
    return BrokerBreaker(15, clock=clock, background=trials.append)


def test_a_healthy_broker_is_published_to_inline():
    send, trials = Broker(), []
    gate = breaker(Clock(), trials)
    assert [gate.publish(send) for _ in range(3)] == ["sent"] * 3
    assert send.calls == 3 and trials == [] and not gate.is_open


def test_after_a_failure_the_broker_is_skipped_and_logged_once(caplog):
    clock, send, trials = Clock(), Broker(), []
    gate = breaker(clock, trials)
    send.down = True
    assert gate.publish(send) == "failed"
    clock.now += 14
    assert [gate.publish(send) for _ in range(50)] == ["skipped"] * 50
    assert send.calls == 1  # 50 requests, no broker timeout paid
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "stay pending for the sweep" in warnings[0].getMessage()
    assert "s3cret" not in caplog.text  # the broker's own message may carry its URL


def test_the_trial_runs_off_the_request_and_closes_the_breaker(caplog):
    caplog.set_level(logging.INFO)
    clock, send, trials = Clock(), Broker(), []
    gate = breaker(clock, trials)
    send.down = True
    gate.publish(send)
    clock.now += 16
    send.down = False
    assert gate.publish(send) == "trial" and send.calls == 1  # not run on this request
    assert gate.publish(send) == "skipped"  # one trial at a time
    (trial,) = trials
    trial()
    assert send.calls == 2 and not gate.is_open
    assert gate.publish(send) == "sent"
    assert "broker reachable again" in caplog.text


def test_a_failed_trial_opens_another_window():
    clock, send, trials = Clock(), Broker(), []
    gate = breaker(clock, trials)
    send.down = True
    gate.publish(send)
    clock.now += 16
    assert gate.publish(send) == "trial"
    trials.pop()()
    assert gate.is_open
    clock.now += 14
    assert gate.publish(send) == "skipped"
    clock.now += 2
    assert gate.publish(send) == "trial"
