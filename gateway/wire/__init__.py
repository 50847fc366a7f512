"""Wire forms one vendor's dialect and provider family share (the Messages dialect is Anthropic's
own wire, the Responses dialect OpenAI's): its server-tool blocks and citations <-> canonical
blocks, in one place both the ingress dialect and the provider family read."""
