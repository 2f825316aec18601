"""Prompts: the text put before every sentence an encoder embeds (E5's "query: ", a model's own).

What a sentence-transformers model gets, in order:
- `--prompt TEXT` (`load_encoder(prefix=TEXT)`): that text ("" = no prompt);
- `--prompt-name NAME` (`load_encoder(prompt_name=NAME)`): the prompt of that name in the model's
  config (`prompts` in config_sentence_transformers.json); an unknown name is an EncoderError;
- neither: the model's `default_prompt_name` prompt, as `SentenceTransformer.encode` applies it,
  else none. me5-small's default is "query: ".

The prompt is the encoder's `prefix`, part of its fingerprint: embeddings made with another prompt
are another encoder's. The CLI options hand both to the command, which passes them on with the
precision and runtime (`xmine.encoders.EncoderConfig`, or `load_encoder`'s own arguments).
"""

from __future__ import annotations

from xmine.encoders.base import note_once
from xmine.errors import ConfigError, EncoderError

def check_prompt(prefix: str | None, prompt_name: str | None) -> None:
    """ConfigError when both a prompt text (prefix) and a prompt name are given."""
    if prefix is not None and prompt_name is not None:
        raise ConfigError("give --prompt TEXT or --prompt-name NAME, not both")


def model_prompt(name: str, *, prompts: dict[str, str], default_name: str | None, prefix: str | None,
                 prompt_name: str | None) -> str:
    """The prompt encoder `name` is encoded with, given its config's `prompts` and `default_name`
    (a sentence-transformers model's `default_prompt_name`); see the module doc."""
    if prefix is not None:
        return prefix
    if prompt_name is not None:
        if prompt_name not in prompts:
            have = ", ".join(repr(k) for k in prompts) or "none"
            raise EncoderError(f"encoder {name!r}: no prompt named {prompt_name!r} in its config (prompts: {have})")
        return prompts[prompt_name]
    if default_name and prompts.get(default_name):
        note_once(("default-prompt", name, default_name), "%s: encoding with its default prompt %r (%r); --prompt "
                  "or --prompt-name choose another", name, default_name, prompts[default_name])
        return prompts[default_name]
    return ""


__all__ = ["check_prompt", "model_prompt"]
