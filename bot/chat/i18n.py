"""Every sentence the bot says, in English and Simplified Chinese.

A user's language is what they chose with /lang, else what their Telegram
client reports (``language_code``), else English. Image errors are looked up
by their stable code, so the engine's English text is only a fallback.

It is over 300 lines because it is one table per language, kept together so
that a translator sees every sentence, and a missing one, in one file.
"""
from __future__ import annotations

LANGS = ("en", "zh")
LANG_NAMES = {"en": "English", "zh": "简体中文"}

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "start": (
            "Hi! Send me a photo and I'll draw it as anime art.\n\n"
            "• Photos or image files (JPEG, PNG, WebP, HEIC, AVIF) both work; albums too.\n"
            "• /style picks the look, and the buttons under a result redraw it in another one.\n"
            "• In a group, reply /anime to a photo, or send one with the caption /anime.\n\n"
            "/help for more."
        ),
        "help": (
            "How to use me:\n"
            "• Send a photo, an image file (JPEG, PNG, WebP, an iPhone's HEIC, AVIF) or an album: "
            "you get the anime version back.\n"
            "• Send a GIF, a short video or a round video note: it comes back drawn, with its sound. "
            "Long clips are drawn up to their first seconds; each second counts as one photo of your limits.\n"
            "• /style: choose your default style ({styles}).\n"
            "• Buttons under a result: redraw in another style, or get the full-size file "
            "(Telegram recompresses photos; the file is exactly what I drew).\n"
            "• “All styles” under a result: the same photo in every other style, as an album. "
            "Each style counts as one photo of your daily quota.\n"
            "• /style shows every style on a sample photo, free. “Preview on my last photo” draws them "
            "all on your own last photo, for 1 photo of your daily quota.\n"
            "• In groups: reply /anime to a photo (optionally /anime STYLE), or caption a photo /anime.\n"
            "• “Sticker” under a result (or /sticker as a reply to your photo): you, cut out, in a sticker set of "
            "your own. “Avatar”: a square profile picture. “No background”: the cut-out as a file.\n"
            "• /settings: faces at full detail, strength, keep the photo's colours.\n"
            "• /lang: language. /about: credits and licences.\n"
            "• /privacy: what I keep and for how long. /forget: delete it all.\n\n"
            "Repeats are instant: I remember what I've drawn."
        ),
        "about": "animebot draws photos as anime on an ordinary CPU.\n\nStyles, who made them, and their terms:\n"
                 "{models}\n\nAlso used:\n{others}",
        "about_style": "• {name} ({command})\n  {credits}\n  Licence: {license}",
        "style_prompt": "Pick a style. Your current one is {style}.",
        "style_line": "{number}. {name}: {about}",
        "style_invite": "Send me a photo to see it drawn: the buttons under the result redraw it in another "
                        "style, and “All styles” draws it in every one.",
        "style_own_hint": "“Preview on my last photo” draws every style on the last photo you sent "
                          "(1 photo of your daily quota).",
        "preview_sample": "Every style on one photo. Your current one is {style}; tap a number to choose:",
        "preview_own": "Your last photo in every style. Your current one is {style}; tap a number to choose:",
        "preview_missing": "({count} of the styles could not be drawn just now; they are left out.)",
        "preview_drawing": "Drawing every style on one photo for the previews…",
        "preview_mine": "🖼 Preview on my last photo",
        "no_last_photo": "Send me a photo first: then I can preview every style on it.",
        "preview_needs_photo": "I preview styles on photos only, and the last thing you sent me was a clip. "
                               "Send me a photo, then press Preview again.",
        "all_styles": "🖼 All styles",
        "styles_queued": "{count} styles: in queue…",
        "styles_drawing": "{count} styles: drawing…",
        "styles_buttons": "Full-size files, by style:",
        "styles_quota_partial": "Not drawn: the last {left_out} of the {count} styles, over today's limit of "
                                "{limit} photos. It resets at midnight UTC.",
        "styles_limit_partial": "I took {taken} of the {count} styles; the other {left_out} would pass the {limit} "
                                "photos I keep waiting for one person, so press All styles again once these are back.",
        "styles_busy_partial": "I took {taken} of the {count} styles; the other {left_out} did not fit in my queue, "
                               "which is full right now, so press All styles again in a minute.",
        "selfie_only": "🙂 {style} is made for selfies, and the faces in this photo are small. "
                       "For a scene like this one, try {scene}.",
        "selfie_only_plain": "🙂 {style} is made for selfies, and the faces in this photo are small.",
        "selfie_no_face": "🙂 {style} is made for selfies, and I found no face in this photo. "
                          "For a scene like this one, try {scene}.",
        "selfie_no_face_plain": "🙂 {style} is made for selfies, and I found no face in this photo.",
        "style_set": "Style set to {style}. Send a photo!",
        "lang_prompt": "Choose a language:",
        "lang_set": "Language set to English.",
        "queued": "In queue: {ahead} photos before yours…",
        "queued_one": "In queue: 1 photo before yours…",
        "queued_next": "In queue: yours is next…",
        "queued_far": "In queue: more than 10 photos before yours…",
        "drawing": "Drawing…",
        "album_queued": "Album of {count} photos: in queue…",
        "album_drawing": "Album of {count} photos: drawing…",
        "busy": "I'm busy right now. Please try again in a minute.",
        "per_user_limit": "You already have {count} photos waiting, the most I keep for one person. "
                          "Send this one again once some of them are back.",
        "file_too_big": "That file is {size_mb:.0f} MB; I can only fetch files up to 20 MB. Please send a smaller one.",
        "not_an_image_file": "That file isn't an image. Send a photo, or a JPEG, PNG, WebP, HEIC or AVIF file.",
        "worker_lost": "Sorry, something went wrong while drawing this one. Please send it again.",
        "style_unavailable": "That style can't be drawn right now: none of my drawing machines has it. "
                             "Please pick another with /style.",
        "internal": "Sorry, something went wrong on my side. Please try again.",
        "album_partial": "{failed} of {count} photos could not be drawn: {reason}",
        "styles_partial": "{failed} of {count} styles could not be drawn: {reason}",
        "unknown_style": "I don't know the style {style!r}. Available: {styles}.",
        "anime_needs_photo": "Reply /anime to a photo (or send a photo with the caption /anime).",
        "sticker_needs_photo": "Reply /sticker to a photo or a clip of yours to make it a sticker.",
        "sticker_own_photo": "In a group, /sticker works on a photo or clip you sent: reply it to one of yours.",
        "button_expired": "This button has expired. Send the photo again.",
        "text_hint": "Send me a photo and I'll draw it as anime. /help for more.",
        "unknown_command": "I don't know that command. /help lists what I can do.",
        "full_size": "📄 Full size",
        "avatar": "👤 Avatar",
        "sticker": "🎭 Sticker",
        "no_background": "✂️ No background",
        "webapp_button": "🎚 Strength & styles",
        "webapp_menu": "Studio",
        "webapp_too_many": "Too many requests at once; wait a minute.",
        "webapp_no_job": "That drawing is no longer followed here; reload the page.",
        "webapp_rate_limited": "You're asking for drawings faster than I can make them (up to {count} a minute). "
                               "Wait a minute and try again.",
        "webapp_per_user_limit": "You already have {count} drawings waiting, the most I keep for one person. "
                                 "Try again when some are done.",
        "webapp_bad_request": "That request was not understood; reload the page.",
        "webapp_gone": "That picture is no longer kept; send the photo again in the chat.",
        "webapp_restarting": "The bot is restarting; try again in a minute.",
        "sticker_open_set": "➕ Add my sticker set",
        "sticker_set_title": "Anime me by @{bot}",
        "sticker_set_title_video": "Anime me, moving, by @{bot}",
        "clip_buttons": "Make it a video sticker or an animated avatar, or get the file:",
        "sticker_start_button": "💬 Open a chat with me",
        "sticker_needs_start": "{name}, to keep your stickers in a set of your own I need a private chat with you: "
                               "tap the button, press Start, then press Sticker here again.",
        "sticker_not_yours": "Only the person who asked for this picture or clip can make it a sticker.",
        "sticker_set_refused": "Telegram wouldn't add this sticker to your set, so here it is on its own.",
        "sticker_oval": "Stickers here are cut as an oval: this bot has no person cut-out model installed.",
        "start_sticker": "Now we have a chat: press 🎭 Sticker under your result again (in the group, or here), and it "
                         "goes into a sticker set of your own.",
        "fast_mode": "⚡ Many photos are waiting, so this one is drawn in fast mode, with the lighter {style} style.",
        "settings": (
            "Drawing settings for this chat:\n"
            "• Faces drawn again at full detail: {faces}\n"
            "• Strength of the style: {strength}%\n"
            "• Keep the photo's colours: {keep}"
        ),
        "on": "on",
        "off": "off",
        "button_faces": "🙂 Faces: {state}",
        "button_keep": "🎨 Keep colours: {state}",
        "caption_style": "{style}",
        "empty": "The file is empty.",
        "not_image": "This file is not an image I can read (try JPEG, PNG, WebP, HEIC or AVIF).",
        "corrupt": "This image file is damaged or truncated and can't be read.",
        "format": "This image format isn't supported; send a JPEG, PNG, WebP, HEIC or AVIF.",
        "too_large": "This image has too many pixels for me to read safely; send a smaller one.",
        "too_small": "This image is too small; send one at least 32 px on each side.",
        "aspect": "This image is too long and thin; the aspect ratio may be at most 20:1.",
        "download_failed": "I couldn't fetch that file from Telegram. Please send it again.",
        "rate_limited": "You're sending photos faster than I can draw them (up to {count} a minute). "
                        "Please wait a minute and send this one again.",
        "quota_reached": "You've reached today's limit of {count} photos. It resets at midnight UTC.",
        "not_allowed": "Sorry, this is a private bot. Ask its owner for access.",
        "admins_only": "That command is only for this bot's admins.",
        "privacy": (
            "What I keep about you, and for how long:\n"
            "• Your photos: downloaded to be drawn, held in memory while they are, and never stored. "
            "A /style preview of your own photo shows a small copy of it, kept like a result.\n"
            "• What I drew: kept on this bot's server so that a repeat comes back at once, for at most "
            "{days} (less when the cache is full).\n"
            "• Telegram's ids of your photos and of my answers, your requests and the buttons under results: "
            "at most {days}. The messages Telegram passes me: an hour after they are answered.\n"
            "• Your style, language and drawing settings: until you delete them.\n"
            "• How many photos you had drawn today, for the daily limit.\n\n"
            "Who sees it: the drawing happens on the machines of whoever runs this bot, with no outside "
            "service. Its admins see totals in /stats (the queue, counts, who is waiting by user id), never "
            "your photos.\n\n"
            "To delete everything now: /forget, or the button in /settings. Your limits for today stay as they are."
        ),
        "privacy_scaled_out": (
            "This bot draws on several machines: your photo crosses its Redis server to reach one and is gone "
            "from there once drawn, and the drawing waits there until the bot fetches it (at most an hour, "
            "usually under a second). /forget stops and removes what is still there."
        ),
        "forget_in_private": "Send /forget to me in a private chat: it deletes what I keep about you.",
        "forget_others_admins_only": "Only this bot's admins can delete someone else's data. Send /forget alone "
                                     "to delete yours.",
        "forget_usage": "Send /forget USER_ID (digits) to delete what I keep about that user.",
        "forget_ask": (
            "Delete everything I keep about you? Your results and their files, the records of your photos, "
            "your requests, your settings and the buttons under your results. Photos being drawn for you are "
            "stopped. This can't be undone."
        ),
        "forget_ask_admin": "Delete everything this bot keeps about user {user_id}? This can't be undone.",
        "button_forget": "🗑 Delete my data…",
        "button_forget_yes": "🗑 Yes, delete it all",
        "button_forget_no": "Keep it",
        "forget_kept_all": "Nothing was deleted.",
        "forgetting_now": "Deleting…",
        "inline_empty": "No results yet: send me a photo",
        "inline_none_in_style": "No {style} results yet: send me a photo",
        "inline_no_style": "No style has that name: type a style's name, or nothing",
        "forgetting": "I'm deleting your data right now. Send this again in a moment.",
        "forgot_head": "Done. I deleted everything I kept about you:",
        "forgot_head_admin": "Done. I deleted everything kept about user {user_id}:",
        "forgot_nothing": "Done. I kept nothing about you, so there was nothing to delete.",
        "forgot_nothing_admin": "Done. Nothing was kept about user {user_id}.",
        "forgot_results": "results, with their files: {count}",
        "forgot_sticker_sets": "Your sticker sets are yours in Telegram, and only you can delete them: send /delpack "
                               "to @Stickers and pick each of these.\n{sets}",
        "forgot_sticker_sets_admin": "Their sticker sets stay in Telegram; only they can delete them (/delpack to "
                                     "@Stickers):\n{sets}",
        "forgot_photos": "records of photos (Telegram's ids and their hashes): {count}",
        "forgot_requests": "stored requests: {count}",
        "forgot_updates": "stored messages: {count}",
        "forgot_buttons": "buttons under results: {count}",
        "forgot_stopped": "photos being drawn, stopped: {count}",
        "forgot_settings": "your style, language and drawing settings",
        "forgot_settings_admin": "their style, language and drawing settings",
        "forgot_kept": "Results someone else asked for too stay theirs; only your link to them is gone: {count}",
        "forgot_kept_admin": "Results someone else asked for too stay theirs; only this user's link to them is gone: "
                             "{count}",
        "day": "{count} day",
        "days": "{count} days",
        "forgot_after": "What I sent you is still in this chat: delete the chat in Telegram to remove it. "
                        "Your limits for today stay as they were.",
        "stats": (
            "Queue: {waiting} waiting, {running} drawing; workers: {health}\n"
            "Waiting by user: {by_user}\n"
            "Workers: {workers}\n"
            "Last hour: {done_hour} photos drawn ({per_min:.1f}/min over the last 10 min)\n"
            "Last 24 h: {jobs_day} requests, {done_day} photos drawn, {failed_day} failed, {cancelled_day} cancelled, "
            "{refused_day} refused\n"
            "Cache: {hits} of {lookups} answered from cache ({hit_rate:.0f}%)\n"
            "Top problems (24 h): {problems}"
        ),
        "none": "none",
        "first_frame": "🎞 That was an animation: I drew its first frame.",
        "not_taken": "Photos not taken so far: {count}. Send them again once these are back.",
        "quota_partial": "{left_out} of your photos were left out: they are over today's limit of {count}. "
                         "It resets at midnight UTC.",
        "limit_partial": "I took {taken} of these {count} photos; the other {left_out} would pass the {limit} "
                         "I keep waiting for one person, so send them again once these are back.",
        "busy_partial": "I took {taken} of these {count} photos; the other {left_out} did not fit in my queue, "
                        "which is full right now, so send them again in a minute.",
        "album_buttons": "Full-size files, by photo:",
        "already_coming": "Already on its way…",
        "already_sent": "Sent just now: it is above.",
        "not_your_menu": "This menu belongs to someone else. Send {command} for your own.",
        "settings_admins_only": "Only this group's admins can change its settings.",
        "clip_drawing": "Drawing frame {done} of {total}…",
        "button_cancel": "✖ Cancel",
        "cancelling": "Stopping…",
        "cancelling_already": "Already stopping: nothing will be sent, and it costs nothing.",
        "cancelled": "Cancelled: nothing was sent, and it doesn't count against your limits.",
        "not_your_job": "Only the person who sent it can cancel it.",
        "job_gone": "That one is already finished.",
        "clip_over_limit": "That clip counts as {units} photos (one per second); with what you have waiting, "
                           "there is room for {room} of the {count} I keep for one person. Send it again once "
                           "your other photos are back, or send a shorter clip.",
        "clip_over_quota": "That clip counts as {units} photos (one per second), and you have {left} of today's "
                           "{count} left. It resets at midnight UTC; a shorter clip may fit now.",
        "album_clips": "I draw clips one at a time: send the videos of this album on their own to get them drawn.",
        "bad_clip": "I couldn't read that video. Send an MP4, a GIF or a WebM.",
        "clip_trimmed": "✂️ I draw clips up to {seconds:g} seconds long: this is the start of yours.",
        "clip_silent": "🔇 Its sound could not be read, so this comes back silent.",
    },
    "zh": {
        "start": (
            "你好！发给我一张照片，我会把它画成动漫风格。\n\n"
            "• 照片或图片文件（JPEG、PNG、WebP、HEIC、AVIF）都可以，相册也行。\n"
            "• /style 选择画风；结果下方的按钮可以换一种画风重画。\n"
            "• 在群组里，用 /anime 回复一张照片，或发送带 /anime 说明的照片。\n\n"
            "/help 查看更多。"
        ),
        "help": (
            "使用方法：\n"
            "• 发送照片、图片文件（JPEG、PNG、WebP、iPhone 的 HEIC、AVIF）或相册，我会回复动漫版本。\n"
            "• 发送 GIF、短视频或圆形视频消息：我会画好后发回，并保留声音。"
            "较长的片段只画开头几秒；每秒计作一张照片的额度。\n"
            "• /style：选择默认画风（{styles}）。\n"
            "• 结果下方的按钮：换画风重画，或获取原尺寸文件（Telegram 会压缩照片，文件是原样的结果）。\n"
            "• 结果下方的“全部画风”：同一张照片的其他所有画风，以相册发送。每种画风计入每日额度的一张。\n"
            "• /style 在一张示例照片上展示所有画风，不计额度。“用我上一张照片预览”会把所有画风画在你上一张照片上，"
            "计入每日额度的一张。\n"
            "• 群组中：用 /anime 回复照片（可加画风，如 /anime STYLE），或给照片加说明 /anime。\n"
            "• 结果下方的“贴纸”（或用 /sticker 回复你的照片）：把你抠出来，放进你自己的贴纸包。"
            "“头像”：方形头像。“去背景”：抠图文件。\n"
            "• /settings：人脸精细重绘、画风强度、保留照片颜色。\n"
            "• /lang：语言。/about：致谢与许可。\n"
            "• /privacy：我保存什么、保存多久。/forget：全部删除。\n\n"
            "重复的照片会立刻回复：画过的我都记得。"
        ),
        "about": "animebot 在普通 CPU 上把照片画成动漫。\n\n画风、作者及其条款：\n{models}\n\n另外使用：\n{others}",
        "about_style": "• {name}（{command}）\n  {credits}\n  许可：{license}",
        "style_prompt": "选择画风。当前画风：{style}。",
        "style_line": "{number}. {name}：{about}",
        "style_invite": "发给我一张照片看看效果：结果下方的按钮可以换一种画风重画，“全部画风”会用每种画风各画一张。",
        "style_own_hint": "“用我上一张照片预览”会把每种画风画在你上一张照片上（计入每日额度的一张）。",
        "preview_sample": "同一张照片的所有画风。当前画风：{style}；点编号即可选择：",
        "preview_own": "你上一张照片的所有画风。当前画风：{style}；点编号即可选择：",
        "preview_missing": "（有 {count} 种画风暂时画不了，未列出。）",
        "preview_drawing": "正在为预览用每种画风各画一张…",
        "preview_mine": "🖼 用我上一张照片预览",
        "no_last_photo": "请先发一张照片给我，然后我才能用每种画风预览它。",
        "preview_needs_photo": "我只能在照片上预览画风，而你上次发给我的是一个片段。请发一张照片，然后再点预览。",
        "all_styles": "🖼 全部画风",
        "styles_queued": "{count} 种画风：排队中…",
        "styles_drawing": "{count} 种画风：正在绘制…",
        "styles_buttons": "各画风的原尺寸文件：",
        "styles_quota_partial": "{count} 种画风中有 {left_out} 种超出了今天 {limit} 张的上限，未被绘制。UTC 午夜重置。",
        "styles_limit_partial": "{count} 种画风中我收下了 {taken} 种；其余 {left_out} 种会超过每人 {limit} 张的等待上限，"
                                "请等这些完成后再点“全部画风”。",
        "styles_busy_partial": "{count} 种画风中我收下了 {taken} 种；其余 {left_out} 种排不进已满的队列，"
                               "请一分钟后再点“全部画风”。",
        "selfie_only": "🙂 {style}是为自拍设计的，这张照片里的人脸太小。这样的场景可以试试{scene}。",
        "selfie_only_plain": "🙂 {style}是为自拍设计的，这张照片里的人脸太小。",
        "selfie_no_face": "🙂 {style}是为自拍设计的，这张照片里我没有找到人脸。这样的场景可以试试{scene}。",
        "selfie_no_face_plain": "🙂 {style}是为自拍设计的，这张照片里我没有找到人脸。",
        "style_set": "画风已设为 {style}。发一张照片吧！",
        "lang_prompt": "选择语言：",
        "lang_set": "语言已设为简体中文。",
        "queued": "排队中：前面还有 {ahead} 张…",
        "queued_one": "排队中：前面还有 1 张…",
        "queued_next": "排队中：下一张就是你的…",
        "queued_far": "排队中：前面还有 10 张以上…",
        "drawing": "正在绘制…",
        "album_queued": "相册共 {count} 张：排队中…",
        "album_drawing": "相册共 {count} 张：正在绘制…",
        "busy": "我现在很忙，请一分钟后再试。",
        "per_user_limit": "你已有 {count} 张照片在等待，这是每人的上限。等其中一些完成后再发送这张。",
        "file_too_big": "这个文件有 {size_mb:.0f} MB，我只能获取 20 MB 以内的文件，请发送小一点的。",
        "not_an_image_file": "这个文件不是图片。请发送照片，或 JPEG、PNG、WebP、HEIC、AVIF 文件。",
        "worker_lost": "抱歉，绘制这张时出了问题，请重新发送。",
        "style_unavailable": "这个画风现在画不了：没有一台绘图机器装有它。请用 /style 换一个。",
        "internal": "抱歉，我这边出了问题，请再试一次。",
        "album_partial": "{count} 张中有 {failed} 张无法绘制：{reason}",
        "styles_partial": "{count} 种画风中有 {failed} 种无法绘制：{reason}",
        "unknown_style": "没有画风 {style!r}。可用画风：{styles}。",
        "anime_needs_photo": "请用 /anime 回复一张照片（或发送带 /anime 说明的照片）。",
        "sticker_needs_photo": "请用 /sticker 回复你的一张照片或一段视频，把它做成贴纸。",
        "sticker_own_photo": "在群组里，/sticker 只能用于你自己发的照片或视频：请回复你发的。",
        "button_expired": "这个按钮已过期，请重新发送照片。",
        "text_hint": "发给我一张照片，我会把它画成动漫。/help 查看更多。",
        "unknown_command": "我不认识这个命令。/help 列出了我能做的事。",
        "full_size": "📄 原尺寸文件",
        "avatar": "👤 头像",
        "sticker": "🎭 贴纸",
        "no_background": "✂️ 去背景",
        "webapp_button": "🎚 强度与画风",
        "webapp_menu": "工作室",
        "webapp_too_many": "请求太多了，请等一分钟。",
        "webapp_no_job": "这里已不再跟踪这次绘制，请刷新页面。",
        "webapp_rate_limited": "你请求绘制的速度超过了我的绘制速度（每分钟最多 {count} 张）。请等一分钟再试。",
        "webapp_per_user_limit": "你已有 {count} 张作品在等待，这是每人的上限。等其中一些完成后再试。",
        "webapp_bad_request": "无法理解这个请求，请刷新页面。",
        "webapp_gone": "这张图片已不再保存，请在聊天中重新发送照片。",
        "webapp_restarting": "机器人正在重启，请一分钟后再试。",
        "sticker_open_set": "➕ 添加我的贴纸包",
        "sticker_set_title": "我的动漫贴纸 @{bot}",
        "sticker_set_title_video": "我的动态动漫贴纸 @{bot}",
        "clip_buttons": "把它做成动态贴纸或动态头像，或者获取文件：",
        "sticker_start_button": "💬 和我私聊",
        "sticker_needs_start": "{name}，要把贴纸放进你自己的贴纸包，我需要先和你私聊："
                               "点按钮，按“开始”，再回到这里按一次“贴纸”。",
        "sticker_not_yours": "只有请求这张图或这段视频的人才能把它做成贴纸。",
        "sticker_set_refused": "Telegram 没有把这张贴纸加进你的贴纸包，先单独发给你。",
        "sticker_oval": "这里的贴纸按椭圆裁剪：这个机器人没有安装人像抠图模型。",
        "start_sticker": "我们已经开始私聊了：再按一次结果下面的“🎭 贴纸”（在群里或这里都可以），它就会放进你自己的贴纸包。",
        "fast_mode": "⚡ 排队的照片较多，这张用快速模式（更轻的「{style}」风格）绘制。",
        "settings": (
            "本聊天的绘制设置：\n"
            "• 人脸精细重绘：{faces}\n"
            "• 画风强度：{strength}%\n"
            "• 保留照片颜色：{keep}"
        ),
        "on": "开",
        "off": "关",
        "button_faces": "🙂 人脸：{state}",
        "button_keep": "🎨 保留颜色：{state}",
        "caption_style": "{style}",
        "empty": "文件是空的。",
        "not_image": "这个文件不是我能读取的图片（请用 JPEG、PNG、WebP、HEIC 或 AVIF）。",
        "corrupt": "图片文件已损坏或不完整，无法读取。",
        "format": "不支持这种图片格式，请发送 JPEG、PNG、WebP、HEIC 或 AVIF。",
        "too_large": "图片像素太多，无法安全读取，请发送小一点的。",
        "too_small": "图片太小，每边至少需要 32 像素。",
        "aspect": "图片太细长了，长宽比最多 20:1。",
        "download_failed": "无法从 Telegram 获取这个文件，请重新发送。",
        "rate_limited": "你发送照片的速度超过了我的绘制速度（每分钟最多 {count} 张）。请等一分钟再发这张。",
        "quota_reached": "你已达到今天 {count} 张照片的上限，UTC 午夜重置。",
        "not_allowed": "抱歉，这是一个私人机器人。请向它的主人申请使用权限。",
        "admins_only": "这个命令只供本机器人的管理员使用。",
        "privacy": (
            "我保存了你的哪些数据、保存多久：\n"
            "• 你的照片：下载后用于绘制，只在绘制期间保存在内存中，从不存储。"
            "用你自己的照片生成的 /style 预览图里有它的小图，按结果保存。\n"
            "• 画好的结果：保存在本机器人的服务器上，这样重复发送时能立刻返回，最多 {days}"
            "（缓存满时更短）。\n"
            "• Telegram 给你的照片和我的回复的编号、你的请求和结果下面的按钮：最多 {days}。"
            "Telegram 转给我的消息：回复后一小时。\n"
            "• 你的画风、语言和绘制设置：直到你删除为止。\n"
            "• 你今天画了多少张，用于每日额度。\n\n"
            "谁能看到：绘制在运行本机器人的人自己的机器上进行，不使用任何外部服务。"
            "管理员在 /stats 中只能看到总数（队列、计数、按用户编号列出的等待者），看不到你的照片。\n\n"
            "立刻删除全部数据：/forget，或 /settings 里的按钮。你今天的额度保持不变。"
        ),
        "privacy_scaled_out": (
            "本机器人在多台机器上绘制：你的照片经过它的 Redis 服务器送到其中一台，画完就从那里删除；"
            "画好的结果在那里等机器人取走（最多一小时，通常不到一秒）。/forget 会停止并删除还在那里的内容。"
        ),
        "forget_in_private": "请在私聊中给我发送 /forget：它会删除我保存的关于你的数据。",
        "forget_others_admins_only": "只有本机器人的管理员可以删除别人的数据。只发送 /forget 可以删除你自己的。",
        "forget_usage": "发送 /forget 用户编号（数字），删除我保存的关于该用户的数据。",
        "forget_ask": (
            "删除我保存的关于你的全部数据吗？包括你的结果及其文件、你发送的照片的记录、你的请求、你的设置"
            "和结果下面的按钮。正在为你绘制的照片会被停止。此操作无法撤销。"
        ),
        "forget_ask_admin": "删除本机器人保存的关于用户 {user_id} 的全部数据吗？此操作无法撤销。",
        "button_forget": "🗑 删除我的数据…",
        "button_forget_yes": "🗑 是的，全部删除",
        "button_forget_no": "保留",
        "forget_kept_all": "什么都没有删除。",
        "forgetting_now": "正在删除…",
        "inline_empty": "还没有结果：先给我发一张照片",
        "inline_none_in_style": "还没有{style}画风的结果：先给我发一张照片",
        "inline_no_style": "没有这个名字的画风：输入画风名，或什么都不输入",
        "forgetting": "我正在删除你的数据。请稍后再发送一次。",
        "forgot_head": "完成。我删除了保存的关于你的全部数据：",
        "forgot_head_admin": "完成。已删除关于用户 {user_id} 的全部数据：",
        "forgot_nothing": "完成。我没有保存关于你的任何数据，所以没有需要删除的。",
        "forgot_nothing_admin": "完成。没有保存关于用户 {user_id} 的数据。",
        "forgot_results": "结果及其文件：{count}",
        "forgot_sticker_sets": "你的贴纸包属于你在 Telegram 的账号，只有你能删除：向 @Stickers 发送 /delpack，"
                               "再逐个选择：\n{sets}",
        "forgot_sticker_sets_admin": "该用户的贴纸包仍在 Telegram 中，只有本人能删除"
                                     "（向 @Stickers 发送 /delpack）：\n{sets}",
        "forgot_photos": "照片的记录（Telegram 的编号和哈希）：{count}",
        "forgot_requests": "保存的请求：{count}",
        "forgot_updates": "保存的消息：{count}",
        "forgot_buttons": "结果下面的按钮：{count}",
        "forgot_stopped": "已停止的正在绘制的照片：{count}",
        "forgot_settings": "你的画风、语言和绘制设置",
        "forgot_settings_admin": "该用户的画风、语言和绘制设置",
        "forgot_kept": "别人也请求过的结果为他们保留，只删除了与你的关联：{count}",
        "forgot_kept_admin": "别人也请求过的结果为他们保留，只删除了与该用户的关联：{count}",
        "day": "{count} 天",
        "days": "{count} 天",
        "forgot_after": "我发给你的内容仍在这个聊天里：在 Telegram 中删除这个聊天即可移除。你今天的额度保持不变。",
        "stats": (
            "队列：{waiting} 张等待，{running} 张绘制中；工作进程：{health}\n"
            "按用户等待：{by_user}\n"
            "工作进程：{workers}\n"
            "最近一小时：绘制 {done_hour} 张（最近 10 分钟每分钟 {per_min:.1f} 张）\n"
            "最近 24 小时：{jobs_day} 个请求，绘制 {done_day} 张，失败 {failed_day}，取消 {cancelled_day}，"
            "拒绝 {refused_day}\n"
            "缓存：{lookups} 次中 {hits} 次来自缓存（{hit_rate:.0f}%）\n"
            "常见问题（24 小时）：{problems}"
        ),
        "none": "无",
        "first_frame": "🎞 这是一个动图：我画了它的第一帧。",
        "not_taken": "目前未接收的照片：{count} 张。等这些完成后请重新发送。",
        "quota_partial": "有 {left_out} 张照片超出了今天 {count} 张的上限，未被处理。UTC 午夜重置。",
        "limit_partial": "这 {count} 张中我收下了 {taken} 张；其余 {left_out} 张会超过每人 {limit} 张的等待上限，"
                         "请等这些完成后再发送。",
        "busy_partial": "这 {count} 张中我收下了 {taken} 张；其余 {left_out} 张排不进已满的队列，请一分钟后再发送。",
        "album_buttons": "各张照片的原尺寸文件：",
        "already_coming": "正在处理中…",
        "already_sent": "刚刚已发送，就在上方。",
        "not_your_menu": "这个菜单是别人的。发送 {command} 获取你自己的。",
        "settings_admins_only": "只有本群管理员可以更改设置。",
        "clip_drawing": "正在绘制第 {done} 帧，共 {total} 帧…",
        "button_cancel": "✖ 取消",
        "cancelling": "正在停止…",
        "cancelling_already": "已经在停止了：不会发送任何内容，也不计入额度。",
        "cancelled": "已取消：没有发送任何内容，也不计入你的额度。",
        "not_your_job": "只有发送者本人可以取消。",
        "job_gone": "这个已经完成了。",
        "clip_over_limit": "这个片段计作 {units} 张照片（每秒一张）；算上你正在等待的，每人 {count} 张的上限只剩 "
                           "{room} 张。等其他照片完成后再发送，或发送更短的片段。",
        "clip_over_quota": "这个片段计作 {units} 张照片（每秒一张），你今天的 {count} 张额度只剩 {left} 张。"
                           "额度在 UTC 零点重置；更短的片段现在也许可以。",
        "album_clips": "我一次只画一个片段：请把这个相册里的视频单独发送。",
        "bad_clip": "我无法读取这个视频。请发送 MP4、GIF 或 WebM。",
        "clip_trimmed": "✂️ 我最多绘制 {seconds:g} 秒长的片段：这是你的片段的开头部分。",
        "clip_silent": "🔇 无法读取它的声音，所以发回的是无声版本。",
    },
}

IMAGE_ERROR_CODES = ("empty", "not_image", "corrupt", "format", "too_large", "too_small", "aspect", "bad_clip")


def pick_lang(chosen: str | None, language_code: str | None) -> str:
    """The user's /lang choice, else their client's language if we speak it, else English."""
    if chosen in LANGS:
        return chosen
    if language_code and language_code.lower().startswith("zh"):
        return "zh"
    return "en"


def t(lang: str, key: str, **values: object) -> str:
    table = TEXTS.get(lang, TEXTS["en"])
    return table.get(key, TEXTS["en"][key]).format(**values)


def error_text(lang: str, code: str, engine_message: str) -> str:
    """The user-facing sentence for an error code; never an internal detail.

    The engine's own image messages are written for users and name the
    actual sizes, so English uses them; other languages use the catalogue.
    """
    if code in IMAGE_ERROR_CODES:
        return engine_message if lang == "en" else t(lang, code)
    return t(lang, code) if code in TEXTS["en"] else t(lang, "internal")
