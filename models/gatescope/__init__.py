"""gatescope model code: attention modules, networks, data readers, export."""
