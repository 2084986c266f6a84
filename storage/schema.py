"""The one SQLite file's tables, and the steps that bring an older file up to date.

The cache and the journal keep their tables in the same file (``bot.db``).
Its ``PRAGMA user_version`` says which of :data:`STEPS` it has had; opening
it runs the ones it has not, in order, in one transaction each
(storage/database.py). A step is never edited once released: a change is a
new step, so a database written by any older animebot opens in a newer one.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator

_BASE = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    content_sha256 TEXT NOT NULL,
    style TEXT NOT NULL,
    filename TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    photo_file_id TEXT,
    document_file_id TEXT,
    created_at REAL NOT NULL,
    last_used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS results_lru ON results(last_used);
CREATE TABLE IF NOT EXISTS uploads (
    file_unique_id TEXT PRIMARY KEY,
    content_sha256 TEXT NOT NULL,
    file_id TEXT NOT NULL,
    seen_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS uploads_content ON uploads(content_sha256);
CREATE TABLE IF NOT EXISTS users (
    user_id INTEGER PRIMARY KEY,
    style TEXT,
    lang TEXT,
    photos INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS render_prefs (
    owner_id INTEGER PRIMARY KEY,  -- a user (private chats) or a group chat (negative id)
    faces INTEGER,
    strength INTEGER,
    keep_colours INTEGER
);
CREATE TABLE IF NOT EXISTS stats (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS updates (
    update_id INTEGER PRIMARY KEY,
    payload TEXT NOT NULL,
    received_at REAL NOT NULL,
    handled INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    chat_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    photos INTEGER NOT NULL,
    request TEXT NOT NULL,
    state TEXT NOT NULL,              -- queued, running, done, failed, refused
    outcome TEXT,                     -- why it failed or was refused, for /stats
    attempts INTEGER NOT NULL DEFAULT 0,
    status_message_id INTEGER,        -- the "in queue" message, removed on recovery
    created_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user_id, created_at);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
"""

_BUTTONS_AND_ALBUMS = """
-- What a result's buttons act on: the photo, the style and the settings it was
-- drawn with, in the chat it was shown in. Callback data carries only the id.
CREATE TABLE buttons (
    id TEXT PRIMARY KEY,
    chat_id INTEGER NOT NULL,
    content_sha256 TEXT NOT NULL,
    style TEXT NOT NULL,
    settings TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (chat_id, content_sha256, style, settings)
);
-- Which job took on each message of an album, so parts that arrive late, or
-- come again after a restart, are each taken on exactly once.
CREATE TABLE album_parts (
    chat_id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    media_group_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX album_parts_group ON album_parts(chat_id, media_group_id);
-- Photos a job actually drew (not answered from the cache): the daily quota counts these.
ALTER TABLE jobs ADD COLUMN drawn INTEGER;
-- Result files used to be named by photo and style only, so results of one photo
-- with different settings shared a file. Rows that share one cannot be trusted.
DELETE FROM results WHERE filename IN (SELECT filename FROM results GROUP BY filename HAVING COUNT(*) > 1);
"""

_FACES_AND_LAST_PHOTOS = """
-- How much of the photo its largest face fills: the face box's long side over the photo's short side,
-- as the worker's detector saw it (0: no face found; NULL: no detector ran). A face style, made for
-- selfies, says so under a result whose faces are small.
ALTER TABLE results ADD COLUMN face_share REAL;
-- The content hash of the last photo each user had drawn: /style offers to preview every style on it.
ALTER TABLE users ADD COLUMN last_photo TEXT;
"""

_SPOILERS_AND_STILLS = """
-- A photo sent with a spoiler keeps it in every answer about it: a redraw, All styles, its preview sheet.
ALTER TABLE buttons ADD COLUMN spoiler INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN last_photo_spoiler INTEGER NOT NULL DEFAULT 0;
-- A preview sheet is drawn on the last photo; earlier releases also remembered a clip there.
UPDATE users SET last_photo = NULL
 WHERE last_photo IN (SELECT content_sha256 FROM results WHERE filename LIKE '%.mp4');
"""

_MEDIA_FILE_IDS = """
-- The file id of a result as sent inline: a photo's, or a clip's (an animation, video or video note).
ALTER TABLE results RENAME COLUMN photo_file_id TO media_file_id;
"""

_PRIVACY = """
-- Who asked for each photo (result_key '') and each result: what /forget erases, and what keeps a
-- result that another user still needs. Used again, a row is dated again; the retention sweep drops old ones.
CREATE TABLE holdings (
    user_id INTEGER NOT NULL,
    content_sha256 TEXT NOT NULL,
    result_key TEXT NOT NULL DEFAULT '',
    used_at REAL NOT NULL,
    PRIMARY KEY (user_id, content_sha256, result_key)
);
CREATE INDEX holdings_photo ON holdings(content_sha256);
CREATE INDEX holdings_result ON holdings(result_key);
-- What an older release kept is theirs too: the photos their stored requests name, their last photo,
-- and the photos under the buttons of their private chat.
INSERT OR IGNORE INTO holdings (user_id, content_sha256, result_key, used_at)
    SELECT j.user_id, u.content_sha256, '', j.created_at FROM jobs j, json_each(j.request, '$.sources') s
      JOIN uploads u ON u.file_unique_id = json_extract(s.value, '$.file_unique_id') WHERE json_valid(j.request);
INSERT OR IGNORE INTO holdings (user_id, content_sha256, result_key, used_at)
    SELECT user_id, last_photo, '', CAST(strftime('%s', 'now') AS REAL) FROM users WHERE last_photo IS NOT NULL;
INSERT OR IGNORE INTO holdings (user_id, content_sha256, result_key, used_at)
    SELECT chat_id, content_sha256, '', created_at FROM buttons WHERE chat_id > 0;
-- What a user who said /forget had used of the day's limits, under a one-way key instead of their
-- id, so that forgetting does not reset the rate limit or the daily quota.
CREATE TABLE spent (
    who TEXT NOT NULL,
    at REAL NOT NULL,
    asked INTEGER NOT NULL,
    drawn INTEGER NOT NULL
);
CREATE INDEX spent_who ON spent(who, at);
-- A lifetime count of each user's photos was kept and never read: gone, and with it the rows that
-- held nothing else.
UPDATE users SET photos = 0;
DELETE FROM users WHERE style IS NULL AND lang IS NULL AND last_photo IS NULL;
-- A random key of this database's own for one-way ids: those forgotten users' counts are kept
-- under, and the Celery task ids (which a plain hash of a photo's would give away).
CREATE TABLE secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL);
INSERT INTO secrets (name, value) VALUES ('ids', randomblob(32));
-- /forget requests being carried out: a restart finishes them before any job resumes. ``summary``
-- is what the user is told, kept once the deleting is done, until it was sent.
CREATE TABLE erasures (
    update_id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    chat_id INTEGER NOT NULL,
    lang TEXT NOT NULL,
    message_id INTEGER,
    summary TEXT
);
"""

_STICKERS = """
-- Each user's sticker sets (Telegram keeps the stickers), one line of them for still stickers and one
-- for video stickers (kind 'static' or 'video'), the one being filled being the latest of its kind.
CREATE TABLE sticker_sets (
    name TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    number INTEGER NOT NULL,
    count INTEGER NOT NULL,
    used_at REAL NOT NULL
);
CREATE INDEX sticker_sets_user ON sticker_sets(user_id, kind, number);
-- Which result went into which set as which sticker; file_id '' while it is being added.
CREATE TABLE stickers (
    user_id INTEGER NOT NULL,
    result_key TEXT NOT NULL,
    set_name TEXT NOT NULL,
    position INTEGER NOT NULL,
    file_id TEXT NOT NULL,
    added_at REAL NOT NULL,
    PRIMARY KEY (user_id, result_key)
);
CREATE INDEX stickers_set ON stickers(set_name);
"""

_UPLOADERS = """
-- Who sent each Telegram file: two users can send the same bytes as files of their own (one photo saved
-- and sent again), and /forget deletes the file ids of the user forgotten while the other's stay. A file
-- forwarded from one user to another is the same file, held by each. user_id 0: an older release kept it,
-- and the stored requests do not say who sent it (/forget deletes those with the photo's user's own).
CREATE TABLE uploads_by_user (
    file_unique_id TEXT NOT NULL,
    user_id INTEGER NOT NULL,
    content_sha256 TEXT NOT NULL,
    file_id TEXT NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (file_unique_id, user_id)
);
INSERT OR IGNORE INTO uploads_by_user (file_unique_id, user_id, content_sha256, file_id, seen_at)
    SELECT u.file_unique_id, j.user_id, u.content_sha256, u.file_id, u.seen_at
      FROM uploads u JOIN jobs j ON json_valid(j.request), json_each(j.request, '$.sources') s
     WHERE json_extract(s.value, '$.file_unique_id') = u.file_unique_id;
INSERT OR IGNORE INTO uploads_by_user (file_unique_id, user_id, content_sha256, file_id, seen_at)
    SELECT file_unique_id, 0, content_sha256, file_id, seen_at FROM uploads
     WHERE file_unique_id NOT IN (SELECT file_unique_id FROM uploads_by_user);
DROP TABLE uploads;
ALTER TABLE uploads_by_user RENAME TO uploads;
CREATE INDEX uploads_content ON uploads(content_sha256);
CREATE INDEX uploads_user ON uploads(user_id);
"""

_MEDIA_KINDS = """
-- What each result was sent as (photo, animation, video, video_note or sticker): Telegram never lets a file
-- id change type, so inline mode offers it as that. An older release guessed a clip's kind from its key,
-- which an animated avatar (drawn from a video, sent as an animation) belied: the file ids of clips are
-- forgotten, so the next send uploads each once more, and says what it is.
ALTER TABLE results ADD COLUMN media_kind TEXT;
UPDATE results SET media_kind = CASE WHEN filename LIKE '%.webp' OR filename LIKE '%.webm' THEN 'sticker'
                                     ELSE 'photo' END
 WHERE media_file_id IS NOT NULL AND filename NOT LIKE '%.mp4';
UPDATE results SET media_file_id = NULL WHERE filename LIKE '%.mp4';
"""

_RESULT_NOTES = """
-- What a result's first answer said beside it (an animation's first frame drawn, a clip cut short or
-- silent), comma-separated: a repeat from the cache says it too. Older results are not known to have any.
ALTER TABLE results ADD COLUMN notes TEXT NOT NULL DEFAULT '';
"""

_BLOCKED = """
-- The users an admin blocked (/block, storage/blocked.py): refused everything until /unblock, which deletes
-- the row. /forget keeps it: it is the operator's decision, not the user's data (docs/privacy.md).
CREATE TABLE blocked (
    user_id INTEGER PRIMARY KEY,
    blocked_by INTEGER NOT NULL,  -- the admin who blocked them
    blocked_at REAL NOT NULL
);
"""

STEPS: tuple[str, ...] = (_BASE, _BUTTONS_AND_ALBUMS, _FACES_AND_LAST_PHOTOS, _SPOILERS_AND_STILLS, _MEDIA_FILE_IDS,
                          _PRIVACY, _STICKERS, _UPLOADERS, _MEDIA_KINDS, _RESULT_NOTES, _BLOCKED)


def pending_steps(version: int) -> Iterator[tuple[int, list[str]]]:
    """The steps a file at ``user_version`` ``version`` has not had, in order: each with the version it
    brings the file to, and its statements one by one. One by one, not as a script: sqlite3's
    ``executescript`` commits whatever transaction is open before it runs, and a step must land in one
    transaction with its version."""
    for number, step in enumerate(STEPS[version:], start=version + 1):
        yield number, _statements(step)


def _statements(script: str) -> list[str]:
    """The statements of ``script`` (a ';' in a string or a comment ends none)."""
    found, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip() != ";":  # not the nothing after the last one
                found.append(pending)
            pending = ""
    return found
