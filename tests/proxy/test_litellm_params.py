"""The allow-list of proxy/litellm_params.py against the litellm moim pins."""

import inspect

import pytest

from proxy.errors import BadRequest
from proxy.litellm_params import OPENAI_PARAMS, forwarded, refuse_unsafe
from proxy.upstream import load_litellm


def test_every_allowed_parameter_is_a_named_argument_of_acompletion():
    # a named argument is a request parameter to litellm; anything else lands in its **kwargs,
    # where routing, credentials and litellm's own options are read
    named = set(inspect.signature(load_litellm().acompletion).parameters)

    assert OPENAI_PARAMS - named == set()


def test_forwarded_keeps_openai_parameters_only():
    body = {"model": "m", "messages": [], "temperature": 0, "metadata": {}, "api_base": "x"}

    assert forwarded(body) == {"messages": [], "temperature": 0}


def test_the_first_unknown_field_is_named():
    with pytest.raises(BadRequest) as refused:
        refuse_unsafe({"model": "m", "messages": [], "top_k": 3, "api_key": "k"}, alias=False)

    assert refused.value.param == "top_k"
    assert refused.value.code == "unsupported_parameter"


def test_an_alias_may_name_an_address_a_client_may_not():
    body = {"model": "huggingface/https://endpoint.example", "messages": []}

    refuse_unsafe(body, alias=True)
    with pytest.raises(BadRequest) as refused:
        refuse_unsafe(body, alias=False)
    assert refused.value.param == "model"
