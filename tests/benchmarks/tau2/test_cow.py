"""Copy-on-read DB clones behave exactly like full validated copies, and never touch the shared pristine DB."""

from __future__ import annotations

import copy
import pickle

import pytest

from ecdysis.benchmarks.tau2.cow import CopyOnReadDict
from ecdysis.benchmarks.tau2.domain import EpisodeEnv, TauDomain
from ecdysis.benchmarks.tau2.grading import _db_hash

# Tools that iterate over a whole table: their results must see the episode's own writes.
ITERATING_CALLS = {
    "airline": [("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}),
                ("search_onestop_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"})],
    "retail": [("list_all_product_types", {}),
               ("find_user_id_by_email", {"email": "yusuf.rossi7301@example.com"}),
               ("find_user_id_by_name_zip", {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"})],
}


def _reference_env(domain: TauDomain) -> EpisodeEnv:
    return EpisodeEnv(domain, domain._env_factory(db=domain.validated_db()))


@pytest.mark.slow  # every gold action of the domain, each on a copy-on-write and a full copy
@pytest.mark.parametrize("name", ["airline", "retail"])
def test_every_gold_action_gives_the_same_results_and_db_as_a_full_copy(name: str) -> None:
    domain = TauDomain.load(name)
    clone, reference = domain.new_env(), _reference_env(domain)
    calls = [(action.name, dict(action.arguments)) for task in domain.tasks.values()
             for action in (task.evaluation_criteria.actions or [])]
    calls += ITERATING_CALLS[name]
    assert sum(domain.is_write(tool) for tool, _ in calls) > 50
    for tool, arguments in calls:
        assert clone.call(tool, arguments) == reference.call(tool, arguments), (tool, arguments)
    for tool, arguments in ITERATING_CALLS[name]:  # again, after every write
        assert clone.call(tool, arguments) == reference.call(tool, arguments), (tool, arguments)
    assert _db_hash(clone.db) == _db_hash(reference.db)
    assert _db_hash(clone.db) != _db_hash(domain.validated_db())
    assert _db_hash(domain._pristine_db) == _db_hash(domain.validated_db()), "the shared pristine DB was mutated"


def test_a_lookup_makes_a_private_copy_and_iteration_sees_it() -> None:
    airline = TauDomain.load("airline")
    pristine = airline._pristine_db.reservations["EHGLP3"]
    db = airline.clone_db()
    table = db.reservations
    assert isinstance(table, CopyOnReadDict) and table.private_keys == frozenset()
    record = table["EHGLP3"]
    assert record is not pristine and record == pristine and table.private_keys == {"EHGLP3"}
    record.status = "cancelled"
    assert table["EHGLP3"] is record and table.get("EHGLP3") is record
    assert pristine.status is None
    assert [r for r in table.values() if r.reservation_id == "EHGLP3"] == [record]
    assert db.model_dump()["reservations"]["EHGLP3"]["status"] == "cancelled"


def test_plain_copies_of_a_table_hold_only_private_records() -> None:
    airline = TauDomain.load("airline")
    table = airline.clone_db().users
    pristine = airline._pristine_db.users
    for plain in (dict(table), {**table}, table.copy(), copy.deepcopy(table), pickle.loads(pickle.dumps(table))):
        assert type(plain) is dict and len(plain) == len(pristine)
        assert all(plain[key] is not pristine[key] for key in list(plain)[:50])
    assert table.pop("nope", None) is None
    with pytest.raises(KeyError):
        table.pop("nope")
    key = next(iter(table))
    popped = table.pop(key)
    assert popped is not pristine[key] and key not in table and key in pristine
