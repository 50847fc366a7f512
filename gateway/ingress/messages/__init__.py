"""The Anthropic Messages dialect: wire models (`wire`), decoding into the canonical transcript
(`decode`), the stream encoder and the Message fold (`encode`), and the codec (`codec`)."""
