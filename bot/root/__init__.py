"""The composition root: builds the application, opens what the bot runs on (BotState) and wires the rooms
together (the chat, the flow, the drawing pool, the updates, the Mini App), handing each only its own parts;
nothing imports it but the command line and the tests that start a bot."""
