"""The domain adapter: loading, tool classes, task selection, the private episode environment."""

from __future__ import annotations

import json

import pytest

from ecdysis.benchmarks.tau2.domain import TauDomain, TauDomainError, select_tasks
from ecdysis.records import Split


def test_load_is_cached_and_complete(airline: TauDomain) -> None:
    assert TauDomain.load("airline") is airline
    assert "airline" in airline.policy.lower()
    assert len(airline.tasks) == 50 and len(airline.split_ids("train")) == 30 and len(airline.split_ids("test")) == 20
    names = {schema["function"]["name"] for schema in airline.tool_schemas}
    assert names == set(airline.tool_types)
    assert airline.write_tools == {"book_reservation", "cancel_reservation", "send_certificate",
                                   "update_reservation_baggages", "update_reservation_flights",
                                   "update_reservation_passengers"}
    assert "get_reservation_details" in airline.read_tools and "calculate" in airline.read_tools


def test_retail_write_tools(retail: TauDomain) -> None:
    assert len(retail.tasks) == 114
    assert retail.write_tools == {"cancel_pending_order", "exchange_delivered_order_items",
                                  "modify_pending_order_address", "modify_pending_order_items",
                                  "modify_pending_order_payment", "modify_user_address",
                                  "return_delivered_order_items"}


def test_select_tasks_is_seeded_and_drawn_from_tau_splits(airline: TauDomain) -> None:
    train = select_tasks("airline", Split.TRAIN, n=20, seed=7)
    assert len(train) == 20 and len({t.task_id for t in train}) == 20
    assert all(t.split is Split.TRAIN and t.task_id in airline.split_ids("train") for t in train)
    assert select_tasks("airline", "train", n=20, seed=7) == train
    assert select_tasks("airline", "train", n=20, seed=8) != train
    test = select_tasks("airline", Split.TEST, n=20, seed=7)
    assert {t.task_id for t in test} == set(airline.split_ids("test"))
    assert [t.task_id for t in select_tasks("retail", task_ids=["5", "1"])] == ["5", "1"]


def test_select_tasks_errors_name_what_exists() -> None:
    with pytest.raises(TauDomainError, match="known domains: airline, retail"):
        select_tasks("bank", "train")
    with pytest.raises(TauDomainError, match=r"unknown task id '999'.*known ids: 0, 1, 2"):
        select_tasks("airline", task_ids=["999"])
    with pytest.raises(TauDomainError, match="unknown split 'dev'"):
        select_tasks("airline", "dev")
    with pytest.raises(TauDomainError, match="cannot draw n=31"):
        select_tasks("airline", "train", n=31)


def test_episode_env_results_never_crash(airline: TauDomain) -> None:
    env = airline.new_env()
    assert env.call("no_such_tool", {}) == ("Error: Tool 'no_such_tool' not found.", True)
    content, error = env.call("get_user_details", {"wrong_arg": 1})
    assert error and "unexpected keyword argument" in content
    content, error = env.call("get_user_details", "not a dict")
    assert error and "arguments_not_a_json_object" in content
    content, error = env.call("get_user_details", {"user_id": "emma_kim_9957"})
    assert not error and json.loads(content)["user_id"] == "emma_kim_9957"
    assert [entry.name for entry in env.log] == ["no_such_tool", "get_user_details", "get_user_details",
                                                 "get_user_details"]


def test_peek_refuses_writes_and_is_not_logged(airline: TauDomain) -> None:
    env = airline.new_env()
    content, error = env.peek("cancel_reservation", {"reservation_id": "EHGLP3"})
    assert error and "refuses write tool" in content
    content, error = env.peek("get_reservation_details", {"reservation_id": "EHGLP3"})
    assert not error and json.loads(content)["status"] is None
    assert env.log == []


def test_clones_are_private(airline: TauDomain) -> None:
    first, second = airline.new_env(), airline.new_env()
    _, error = first.call("cancel_reservation", {"reservation_id": "EHGLP3"})
    assert not error and first.executed_writes[0].name == "cancel_reservation"
    assert first.db.reservations["EHGLP3"].status == "cancelled"
    assert second.db.reservations["EHGLP3"].status is None
    assert airline.clone_db().reservations["EHGLP3"].status is None


def test_mock_domain_draws_only_supported_tasks_and_names_the_rest() -> None:
    from ecdysis.benchmarks.tau2.domain import TauDomain, TauDomainError, select_tasks

    mock = TauDomain.load("mock")
    drawn = select_tasks("mock", "test", None)
    unsupported = [tid for tid in mock.split_ids("base") if mock.unsupported_reason(tid)]
    assert drawn and unsupported
    assert {t.task_id for t in drawn} == set(mock.split_ids("base")) - set(unsupported)
    with pytest.raises(TauDomainError, match="not supported: it starts from an initial state"):
        select_tasks("mock", task_ids=["update_task_with_history_and_env_assertions"])
