"""Where bytes come from.

The interface is :class:`~consumer.sources.base.ByteSource` (``base``): list, stat/version, read ranges, stream a
file, describe with libmagic, hand off to another process. Its implementations, one module each: local files
(``local``), objects behind URLs (``objects``); a packed store's file table (``store``) and its token data as a
:class:`~consumer.sources.token_store.TokenStore` (``token_store``); a file's version (``version``).
``open`` chooses one, once
(:func:`~consumer.sources.open.open_source`, :func:`~consumer.sources.open.reopen_source`,
:func:`~consumer.sources.open.locate_store`); nothing outside this package asks which kind a source is.

Underneath: the user's input forms turned into a corpus (``corpus``), paths kept as one packed blob (``paths``),
URL file systems and listings (``urls``), concurrent verified range reads (``range_reader``, ``requests``,
``request_plan``, ``block_cache``, ``cloud``), a remote store's token data read by ranges (``remote_tokens``) and
libmagic (``magic``, ``object_magic``: descriptions from a path or from byte ranges).
"""
