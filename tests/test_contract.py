"""Spark's checkpoint contract, for every strategy on every store: the checks of
``ckptbench.experiments.contract`` (what ``python -m ckptbench contract`` runs), driven in the JVM.

Managers are built by Spark's own factory (``CheckpointFileManager.create``) from the strategy's
class setting, exactly as a streaming query builds it. What is left in the bucket is checked with
boto3 over the whole prefix. That each check catches the breakage it is named for is shown on
managers broken on purpose (``tests/test_foreign.py``), and on a strategy known to break one
(``BROKEN``): there the check must fail, saying so.
"""

from __future__ import annotations

import pytest

import ckpt_impls
from ckptbench.experiments import contract
from helpers import CheckpointFiles

#: (strategy, check) -> what the check must say: a break the strategy's design makes, on every store.
#: ``abortable``'s close() logs the FileAlreadyExistsException of its existence check rather than
#: raise it, so both racing creators' closes return: two winners in every round.
BROKEN = {("abortable", "one of two racing creators wins"):
          rf"^{contract.RACE_ROUNDS} of {contract.RACE_ROUNDS} rounds had no single winner, e.g. race/0: "
          r"\{[01]: 'won', [01]: 'won'\}$"}


@pytest.mark.parametrize("check", list(contract.CHECKS))
def test_the_contract_holds(spark, strategy, store, prefix, check):
    if (strategy, check) in BROKEN:
        with pytest.raises(contract.ContractBroken, match=BROKEN[strategy, check]):
            contract.CHECKS[check](CheckpointFiles(spark, strategy, store, prefix))
        return
    if check == "one of two racing creators wins":
        if not ckpt_impls.get(strategy).exclusive_create:
            pytest.skip(f"{strategy} does not promise exclusive creates (its check and write are separate requests)")
        if store.racy_conditional_put:
            pytest.skip(store.racy_conditional_put)
    contract.CHECKS[check](CheckpointFiles(spark, strategy, store, prefix))
