"""The invocation protocol's shared keys: each study's Protocol takes and refuses them alike."""
import re

import pytest

from abstraction_cost.study_a.sweep import cells
from abstraction_cost.study_b.models import protocol as vision_protocol


def _sweep(given: dict) -> cells.Protocol:
    cells._check_protocol(given)
    return cells.Protocol.from_config({"protocol": given})


PROTOCOLS = {"study_a.sweep.protocol": (_sweep, cells.SweepConfigError),
             "study_b.models.protocol": (lambda given: vision_protocol.Protocol.from_config({"protocol": given}),
                                         ValueError)}


@pytest.mark.parametrize("section", PROTOCOLS)
@pytest.mark.parametrize("key,value", [("blocks", 1.5), ("invocations", True), ("warmup_max", -1),
                                       ("precision", "5%"), ("block_ms", 0)])
def test_a_shared_key_out_of_its_rule_is_refused_by_either_study_naming_it(section, key, value):
    build, error = PROTOCOLS[section]
    with pytest.raises(error, match=re.escape(f"'{section}.{key}': {value!r} is not ")):
        build({key: value})


@pytest.mark.parametrize("section", PROTOCOLS)
def test_max_invocations_is_never_below_invocations_and_numbers_are_floats(section):
    build, _ = PROTOCOLS[section]
    p = build({"invocations": 4, "max_invocations": 2, "precision": 1, "block_ms": 20})
    assert (p.invocations, p.max_invocations) == (4, 4)
    assert isinstance(p.precision, float) and isinstance(p.block_ms, float)
