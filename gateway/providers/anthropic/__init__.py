"""The anthropic provider family: its adapter (`adapter`) and the modules it is built from."""

from gateway.providers.anthropic.adapter import ADAPTER as ADAPTER
from gateway.providers.anthropic.adapter import FAMILY as FAMILY
