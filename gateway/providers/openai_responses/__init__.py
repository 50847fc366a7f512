"""The openai_responses provider family: its adapter (`adapter`) and the modules it is built from."""

from gateway.providers.openai_responses.adapter import ADAPTER as ADAPTER
from gateway.providers.openai_responses.adapter import FAMILY as FAMILY
