"""The OpenAI Chat Completions dialect: wire models (`wire`), decoding into the canonical
transcript (`decode`), the stream encoder and the completion fold (`encode`), and the codec (`codec`)."""
