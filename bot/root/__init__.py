"""The composition root: builds the application, opens the state every room shares and wires the rooms
together (the chat, the flow, the drawing pool, the updates, the Mini App); nothing imports it but the
command line and the tests that start a bot."""
