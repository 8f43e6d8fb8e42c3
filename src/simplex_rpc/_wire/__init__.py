"""The wire layer: every byte of the protocol, and nothing that does I/O.

Keys and base64url (:mod:`.keys`, :mod:`.b64`), strict JSON (:mod:`.strict_json`
over :mod:`.json_pure`), envelopes, the agent's Service RPC messages
(:mod:`.agent_block`), padding, sealing and batches, redaction of key material,
and the backend seam (:mod:`.backend`), which picks the C wrapper
(:mod:`.cbackend`) or the pure-Python functions. Modules here import only each
other and :mod:`simplex_rpc.errors`; the public names are re-exported by
:mod:`simplex_rpc` (the agent's values by :mod:`simplex_rpc.agent`).
"""
