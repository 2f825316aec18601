"""What xmine writes and reads back: artefact directories and their manifests, atomic writes and
hashes (`fileio`), claiming an output before writing it (`outputs`, with what is at a path in
`output_state`), resumable checkpoints (`checkpoints`), which files are xmine's own (`ownership`, asked by the
clean-ups of a work folder and of a killed writer's temporaries, `leftovers`), the typed records manifests are made of
(`records`), what an input artefact records (`input_artefacts`) and `xmine verify` (`verify`).

`xmine.artefacts.directory` holds the registry through which the core opens the artefact kinds
that features own (a projection, an index): the composition root registers their readers."""
