"""The facade: :class:`~session_keeper.SessionKeeper` (entry: ``keeper.py``), what it is
configured with (``settings.py``), how its parts are built and joined (``wiring.py``), and
the sign-in pages the faces open through it for a person (``person_sign_ins.py``).
"""
