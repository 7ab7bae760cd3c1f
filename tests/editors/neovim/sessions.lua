-- Issue 19's session features through the documented keys, shared by both Neovim drivers:
-- `<Leader>dm` (pick a session, the server inserts its mention), `gd` on that mention (its
-- transcript in a read-only buffer, `<C-o>` back), the code lens over the first mention and, where
-- Neovim has them (0.10+), the inlay hints; `<Leader>dl` runs the "Preview" lens, and `<Leader>ds`
-- with a query lists sessions as workspace symbols, the first opened from the quickfix list. Last,
-- the screen: the documented conceal of sound mentions (`@Title`), and the cursor's line as written.
--
-- `run(H, bufnr, done)` reads `spec.sessions`:
--   line       0-based line where the mention is inserted (at its start)
--   insert_id  the session the picker chooses
--   query      what `<Leader>ds` searches for
--   chip       what the inserted mention's line reads once concealed (`@` and its label)
--   relabelled a line with a mention of the inserted session labelled as another session: never a chip
--   one_allowed  last, allow one session (didChangeConfiguration) and see the others' mentions
--              written out again: the prompt must reference more than one session
-- and records into `H.result.sessions`; last, the screen with the cursor off and on a mention.

local M = {}

local function lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function transcript_buffer()
  local buf = vim.api.nvim_get_current_buf()
  if vim.api.nvim_buf_get_name(buf):find("dsh-transcript:", 1, true) and #lines(buf) > 1 then
    return buf
  end
end

-- What the screen shows of each line of `buf`: its first screen row from the line's first column
-- (past the sign column), as drawn: concealed text left out, inline hints in, then whatever virtual
-- text sits at the end of the line; trailing blanks trimmed.
local function shown_lines(buf)
  vim.cmd("redraw")
  local win = vim.api.nvim_win_get_buf(0) == buf and vim.api.nvim_get_current_win() or vim.fn.bufwinid(buf)
  local out = {}
  for lnum = 1, vim.api.nvim_buf_line_count(buf) do
    local pos = vim.fn.screenpos(win, lnum, 1)
    local cells = {}
    for col = pos.col, (pos.row > 0 and vim.o.columns or 0) do
      cells[#cells + 1] = vim.fn.screenstring(pos.row, col)
    end
    out[lnum] = (table.concat(cells):gsub("%s+$", ""))
  end
  return out
end

local function buffer_facts(buf)
  return {
    name = vim.api.nvim_buf_get_name(buf),
    lines = lines(buf),
    modifiable = vim.bo[buf].modifiable,
    buftype = vim.bo[buf].buftype,
    filetype = vim.bo[buf].filetype,
    clients = vim.tbl_count(vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = buf }) or vim.lsp.buf_get_clients(buf)),
  }
end

function M.run(H, bufnr, done)
  local spec, wait_for, keys = H.spec.sessions, H.wait_for, H.keys
  local out = { pickers = {} }
  H.result.sessions = out

  -- A picker plugin would list these; this one takes the session the test names, or the "Preview" lens.
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    local titles = {}
    for index, item in ipairs(items) do
      titles[index] = opts.format_item and opts.format_item(item) or tostring(item)
    end
    if type(items[1]) == "table" and items[1].sessionId then
      table.insert(out.pickers, { prompt = opts.prompt, titles = titles })
      for index, item in ipairs(items) do
        if item.sessionId == spec.insert_id then
          return on_choice(item, index)
        end
      end
      return on_choice(nil, nil)
    end
    for index, title in ipairs(titles) do
      if title == "Preview" then
        out.lens_menu = titles
        return on_choice(items[index], index)
      end
    end
    return select(items, opts, on_choice)
  end

  -- 1. <Leader>dm at the start of the given line: the server inserts the chosen session's mention.
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { spec.line + 1, 0 })
  local before = lines(bufnr)[spec.line + 1]
  keys("<Leader>dm")
  wait_for("the inserted mention", function()
    local line = lines(bufnr)[spec.line + 1]
    return line ~= before and line:find("dsh-session:", 1, true) and line
  end, function(line)
    out.inserted = { before = before, line = line }

    -- 2. gd on the mention: its transcript, read-only; <C-o> comes back.
    vim.api.nvim_win_set_cursor(0, { spec.line + 1, 3 })
    keys("gd")
    wait_for("the transcript buffer after gd", transcript_buffer, function(buf)
      out.definition = buffer_facts(buf)
      keys("<C-o>")
      wait_for("the prompt again after <C-o>", function()
        return vim.api.nvim_get_current_buf() == bufnr
      end, function()
        -- 3. The code lens over the first mention, now the inserted one, the inlay hints (0.10+).
        -- BufEnter asks for the lenses again; until the answer comes, Neovim keeps the ones it had.
        wait_for("the code lens over the inserted mention", function()
          local lenses = vim.lsp.codelens.get(bufnr)
          for _, lens in ipairs(lenses) do
            if lens.range.start.line == spec.line then
              return lenses
            end
          end
        end, function(lenses)
          out.lenses = {}
          for _, lens in ipairs(lenses) do
            table.insert(out.lenses, { line = lens.range.start.line, title = lens.command and lens.command.title })
          end
          local function after_hints()
            -- 4. <Leader>dl on the lens line, "Preview": the preview buffer shows the new mention's session.
            vim.api.nvim_win_set_cursor(0, { out.lenses[1].line + 1, 0 })
            local previews = {}
            for _, buf in ipairs(vim.api.nvim_list_bufs()) do
              if vim.api.nvim_buf_get_name(buf):find("^dsh%-preview:") then
                previews[buf] = vim.api.nvim_buf_get_changedtick(buf)
              end
            end
            keys("<Leader>dl")
            wait_for("the preview from the code lens", function()
              for _, buf in ipairs(vim.api.nvim_list_bufs()) do
                if
                  vim.api.nvim_buf_get_name(buf):find("^dsh%-preview:")
                  and vim.api.nvim_buf_get_changedtick(buf) ~= previews[buf]
                  and #lines(buf) > 1
                then
                  return buf
                end
              end
            end, function(preview)
              out.lens_preview = { lines = lines(preview) }

              -- 5. <Leader>ds + query: sessions in the quickfix list; the first one opens its transcript.
              vim.api.nvim_set_current_buf(bufnr)
              keys("<Leader>ds" .. spec.query .. "<CR>")
              wait_for("workspace symbols in the quickfix list", function()
                local items = vim.fn.getqflist()
                return #items > 0 and items
              end, function(items)
                out.symbols = {}
                for _, item in ipairs(items) do
                  table.insert(out.symbols, { text = item.text, name = vim.api.nvim_buf_get_name(item.bufnr) })
                end
                vim.cmd("cclose")
                vim.cmd("cc 1")
                wait_for("the transcript of the first symbol", transcript_buffer, function(buf)
                  out.symbol_transcript = buffer_facts(buf)
                  vim.api.nvim_set_current_buf(bufnr)
                  out.lines_at_end = lines(bufnr)
                  -- 6. Back in the prompt, the cursor on its first line: the sound mentions read as chips.
                  vim.o.columns = 200
                  vim.api.nvim_win_set_cursor(0, { 1, 0 })
                  H.on_timeout = function()
                    local ns = vim.api.nvim_get_namespaces().dsh_mention_chips or 0
                    local marks = vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })
                    out.chips_at_timeout = { shown = shown_lines(bufnr), extmarks = marks }
                  end
                  wait_for("the mentions concealed to chips", function()
                    local shown = shown_lines(bufnr)
                    return shown[spec.line + 1]:sub(1, #spec.chip) == spec.chip and shown
                  end, function(shown)
                    out.chips = {
                      shown = shown,
                      conceallevel = vim.wo.conceallevel,
                      concealcursor = vim.wo.concealcursor,
                    }
                    -- On the mention's line the text reads as written.
                    vim.api.nvim_win_set_cursor(0, { spec.line + 1, 0 })
                    out.chips.cursor_line = shown_lines(bufnr)[spec.line + 1]
                    -- 6b. A mention of the inserted session labelled with another session's title,
                    -- appended as a last line: a warning, and it reads as written, never as a chip of
                    -- that other title. The line is taken out again afterwards.
                    local last = vim.api.nvim_buf_line_count(bufnr)
                    vim.api.nvim_buf_set_lines(bufnr, last, last, false, { spec.relabelled })
                    vim.api.nvim_win_set_cursor(0, { 1, 0 })
                    wait_for("the relabelled mention warned about and written out", function()
                      for _, d in ipairs(vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.WARN })) do
                        local shown = shown_lines(bufnr)
                        if d.code == "stale-label" and d.lnum == last and shown[last + 1]:find("dsh-session:", 1, true) then
                          return { shown = shown[last + 1], message = d.message }
                        end
                      end
                      return false
                    end, function(relabelled)
                    out.chips.relabelled = relabelled
                    vim.api.nvim_buf_set_lines(bufnr, last, last + 1, false, {})
                    -- 7. One session allowed: the other sessions' mentions are errors (too many
                    -- references), so they read as written again; the first stays a chip.
                    if not spec.one_allowed then
                      return done()
                    end
                    vim.api.nvim_win_set_cursor(0, { 1, 0 })
                    local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr }) or vim.lsp.buf_get_clients(bufnr)
                    local _, client = next(clients)
                    local one = { settings = { dshSessionReference = { maxReferences = 1 } } }
                    if vim.fn.has("nvim-0.11") == 1 then
                      client:notify("workspace/didChangeConfiguration", one)
                    else
                      client.notify("workspace/didChangeConfiguration", one)
                    end
                    wait_for("the mentions past the limit shown as written", function()
                      local shown = shown_lines(bufnr)
                      local flagged = 0
                      for _, d in ipairs(vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.ERROR })) do
                        if d.code == "too-many-references" then
                          flagged = flagged + 1
                          if not shown[d.lnum + 1]:find("dsh-session:", 1, true) then
                            return false
                          end
                        end
                      end
                      return flagged > 0 and shown
                    end, function(shown)
                      out.chips.one_allowed = shown
                      done()
                    end)
                    end)
                  end)
                end)
              end)
            end)
          end
          if not vim.lsp.inlay_hint then
            return after_hints()
          end
          wait_for("the inlay hints", function()
            local hints = vim.lsp.inlay_hint.get({ bufnr = bufnr })
            return #hints > 0 and hints
          end, function(hints)
            out.hints = {}
            for _, hint in ipairs(hints) do
              local label = hint.inlay_hint.label
              if type(label) == "table" then
                local parts = {}
                for _, part in ipairs(label) do
                  table.insert(parts, part.value)
                end
                label = table.concat(parts)
              end
              local position = hint.inlay_hint.position
              table.insert(out.hints, { line = position.line, character = position.character, label = label })
            end
            after_hints()
          end)
        end)
      end)
    end)
  end)
end

return M
