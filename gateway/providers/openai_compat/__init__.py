"""The OpenAI-compatible Chat Completions families' shared adapter (`adapter`) and stream decoder
(`decode`); openai_chat, mistral, kimi and deepseek are built on it."""
