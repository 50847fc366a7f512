"""The OpenAI Responses dialect: request fields (`fields`), tools (`tools`), input items (`items`),
decoding into the canonical transcript (`decode`), continuity tokens (`tokens`), output items
(`output`), the stream encoder (`stream`), and the codec (`codec`)."""
