"""Spark's checkpoint contract, for every strategy on every store: the checks of
``ckptbench.experiments.contract`` (what ``python -m ckptbench contract`` runs), driven in the JVM.

Managers are built by Spark's own factory (``CheckpointFileManager.create``) from the strategy's
class setting, exactly as a streaming query builds it. What is left in the bucket is checked with
boto3 over the whole prefix. That each check catches the breakage it is named for is shown on
managers broken on purpose (``tests/test_foreign.py``).
"""

from __future__ import annotations

import pytest

import ckpt_impls
from ckptbench.experiments import contract
from helpers import CheckpointFiles


@pytest.mark.parametrize("check", list(contract.CHECKS))
def test_the_contract_holds(spark, strategy, store, prefix, check):
    if check == "one of two racing creators wins":
        if not ckpt_impls.get(strategy).exclusive_create:
            pytest.skip(f"{strategy} does not promise exclusive creates (its check and write are separate requests)")
        if store.racy_conditional_put:
            pytest.skip(store.racy_conditional_put)
    contract.CHECKS[check](CheckpointFiles(spark, strategy, store, prefix))
