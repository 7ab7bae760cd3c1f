-- Headless Neovim 0.11 driver for test_neovim.py's typed-query test: the built-in auto-completion
-- (`vim.lsp.completion`, autotrigger on `@`) with the documented 0.11 configuration.
--
-- Run as `nvim --headless --clean -n -u driver_typed.lua prompt.md` with DSH_EDITOR_SPEC naming a
-- JSON file:
--   config      the user's configuration: the 0.7 block's settings and preview, then the 0.11 block
--   result      where to write the JSON result
--   queries     what to type after `@`, one character at a time, as a person types
--   timeout_ms  hard limit for the whole run
-- For each query: `A @`, then each character once the list for what came before it is shown (a
-- person reads the list between keys; Neovim asks again only while its list is open). Once the
-- server has answered for the whole query, the rows Neovim lists are recorded in their order.
-- A space ends Vim's completion before Neovim could ask again, so queries are single words.
-- Last, sessions.lua's steps (issue 19) in the prompt, with the spec's `sessions`.

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h")
local H = dofile(here .. "/harness.lua")
local sessions = dofile(here .. "/sessions.lua")
local spec, result, finish, guard, wait_for, keys = H.spec, H.result, H.finish, H.guard, H.wait_for, H.keys
result.queries = {}
local answered = nil
local requests = 0

H.on_timeout = function(out)
  local info = vim.fn.complete_info({ "items", "pum_visible" })
  out.at_timeout = {
    answered = answered,
    line = vim.api.nvim_get_current_line(),
    cursor = vim.api.nvim_win_get_cursor(0),
    pum_visible = info.pum_visible,
    items = #info.items,
  }
end

H.load_config()

-- The position of the last completion request the server has answered: the list on screen is
-- the one for what is typed once that equals the cursor's own position.
local function watch(client)
  local request = client.request
  client.request = function(self, method, params, handler, bufnr)
    if method ~= "textDocument/completion" then
      return request(self, method, params, handler, bufnr)
    end
    requests = requests + 1
    local position = params.position
    return request(self, method, params, function(err, res, ctx, config)
      handler(err, res, ctx, config)
      answered = position
    end, bufnr)
  end
end

local function shown_for_cursor(client)
  local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  if not answered or answered.line ~= position.line or answered.character ~= position.character then
    return false
  end
  local info = vim.fn.complete_info({ "items", "pum_visible" })
  return info.pum_visible == 1 and #info.items > 0 and info
end

local function run()
  result.version = tostring(vim.version())
  local bufnr = vim.api.nvim_get_current_buf()
  local original = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)

  wait_for("the configuration to attach the server", function()
    return vim.lsp.get_clients({ bufnr = bufnr, name = "dsh_session_reference" })[1]
  end, function(client)
    watch(client)
    local index = 0
    local function next_query()
      index = index + 1
      local query = spec.queries[index]
      if query == nil then
        result.requests = requests
        -- A `.dshprompt` file is a prompt too: Markdown, with the server attached.
        vim.cmd("edit " .. vim.fn.fnameescape(spec.dshprompt))
        local prompt_buf = vim.api.nvim_get_current_buf()
        return wait_for("the server on the .dshprompt file", function()
          return vim.lsp.get_clients({ bufnr = prompt_buf, name = "dsh_session_reference" })[1]
        end, function()
          result.dshprompt_filetype = vim.bo[prompt_buf].filetype
          -- Then issue 19's session features, with inlay hints, in the prompt.
          sessions.run(H, bufnr, function()
            finish(nil)
          end)
        end)
      end
      local chars = vim.fn.split(query, "\\zs")
      vim.api.nvim_win_set_cursor(0, { #original, 0 })
      keys("A @")
      local typed = 0
      local function after_answer()
        wait_for("the list for @" .. table.concat(chars, "", 1, typed), function()
          return shown_for_cursor(client)
        end, function(info)
          if typed < #chars then
            typed = typed + 1
            keys(chars[typed])
            return after_answer()
          end
          local rows = {}
          for _, item in ipairs(info.items) do
            local lsp_item = item.user_data.nvim.lsp.completion_item
            table.insert(rows, { abbr = item.abbr, word = item.word, session_id = lsp_item.data.sessionId })
          end
          table.insert(result.queries, { query = query, line = vim.api.nvim_get_current_line(), rows = rows })
          keys("<C-e><Esc>")
          wait_for("normal mode after @" .. query, function()
            return vim.fn.mode() == "n"
          end, function()
            vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, original)
            next_query()
          end)
        end)
      end
      after_answer()
    end
    next_query()
  end)
end

H.start(run)
