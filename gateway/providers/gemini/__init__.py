"""The gemini provider family: its adapter (`adapter`) and the modules it is built from."""

from gateway.providers.gemini.adapter import ADAPTER as ADAPTER
from gateway.providers.gemini.adapter import FAMILY as FAMILY
