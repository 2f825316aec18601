"""Prompts: the text put before every sentence an encoder embeds (E5's "query: ", a model's own).

What a sentence-transformers model gets, in order:
- `--prompt TEXT` (`load_encoder(prefix=TEXT)`): that text ("" = no prompt);
- `--prompt-name NAME` (`load_encoder(prompt_name=NAME)`): the prompt of that name in the model's
  config (`prompts` in config_sentence_transformers.json); an unknown name is an EncoderError;
- neither: the model's `default_prompt_name` prompt, as `SentenceTransformer.encode` applies it,
  else none. me5-small's default is "query: ".

The prompt is the encoder's `prefix`, part of its fingerprint: embeddings made with another prompt
are another encoder's. The CLI options record what the user asked for in this process
(`set_requested_prompt`), as `--runtime` does, so commands need not pass them along.
"""

from __future__ import annotations

from xmine.encoders.base import note_once
from xmine.errors import ConfigError, EncoderError

#: (prompt text, prompt name) asked for on the command line of this process; (None, None): neither
_requested: tuple[str | None, str | None] = (None, None)


def set_requested_prompt(prompt: str | None, prompt_name: str | None) -> None:
    """Record `--prompt` / `--prompt-name` (None: not given) for `load_encoder(prefix=None)`."""
    global _requested
    if prompt is not None and prompt_name is not None:
        raise ConfigError("give --prompt TEXT or --prompt-name NAME, not both")
    _requested = (prompt, prompt_name)


def asked_prompt(prefix: str | None, prompt_name: str | None) -> tuple[str | None, str | None]:
    """(prefix, prompt name) a `load_encoder` call asks for: its own arguments when it gives
    either, else what the command line asked for."""
    if prefix is not None and prompt_name is not None:
        raise ConfigError("give a prompt text (prefix) or a prompt name, not both")
    return (prefix, prompt_name) if prefix is not None or prompt_name is not None else _requested


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


__all__ = ["asked_prompt", "model_prompt", "set_requested_prompt"]
