"""The client side: load generators (closed loop, open loop) and the transports that carry
a request to the server and back, behind one Transport protocol (in-process, HTTP, emulated
WAN)."""
