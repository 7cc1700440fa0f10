"""The real twin: a world's tools implemented on the real system it mirrors.

The sales world's twin is a Tryton database (an open-source ERP) on SQLite,
created and cached by :func:`mirrorworld.twin.db.ensure` (``mirrorworld twin
up``) and driven by :class:`mirrorworld.twin.backend.TwinBackend` behind the
same tool interface as the mirror. Tryton is an optional dependency
(``pip install 'mirrorworld[twin]'``).
"""
