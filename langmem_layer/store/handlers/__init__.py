"""The handlers of the store's memory ops, one module per family, registered by
op type in ``langmem_layer.store.handlers.registry``."""
