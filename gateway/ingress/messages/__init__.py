"""The Anthropic Messages dialect: wire models (`wire`), decoding into the canonical transcript
(`decode`), the stream encoder (`encode`), the Message fold (`fold`), and the codec (`codec`)."""
